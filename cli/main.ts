// The leasehold command (also kubectl-leasehold, so `kubectl leasehold ...`
// works): picks the subcommand and turns what it throws into a message on
// stderr and an exit code (docs/cli.md, "Exit codes", lists them). Each subcommand is
// imported when it is picked: a run loads only what a run needs.
import { EXIT, ExitError } from './exit-codes.js';
import { UsageError } from './flags.js';
import { apiErrorText } from './leaseapi.js';

export const USAGE = `leasehold: rent a machine through Leasehold and run a command on it

  leasehold run --where EXPR [--offer NAME] [--lease NAME] -- CMD [ARG...]
  leasehold leases [-A] [--json]
  leasehold offers [--json]
  leasehold release NAME [--wait]
  leasehold ssh NAME [--print] [-- CMD...]

Every command takes --kubeconfig FILE, --context NAME and -n/--namespace NS (as kubectl),
and --key FILE (the device key; default $XDG_CONFIG_HOME/leasehold/id_ed25519).
`;

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [command, ...args] = argv;
  const out = process.stdout;
  const err = process.stderr;
  const isRun = command === 'run';
  try {
    switch (command) {
      case 'run':
        return await (await import('./run.js')).run(args, { stdout: out, stderr: err, stdin: process.stdin, env, interrupts: process });
      case 'leases':
        return await (await import('./leases.js')).leases(args, out, env);
      case 'offers':
        return await (await import('./offers.js')).offers(args, out, env);
      case 'release':
        return await (await import('./release.js')).release(args, out, env);
      case 'ssh':
        return await (await import('./ssh.js')).ssh(args, out, err, env);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        out.write(USAGE);
        return command === undefined ? EXIT.usage : EXIT.ok;
      default:
        throw new UsageError(`unknown command ${command}\n${USAGE}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      err.write(`leasehold: ${e.message}\n`);
      return EXIT.usage;
    }
    if (e instanceof ExitError) {
      err.write(`leasehold: ${e.message}\n`);
      return e.code;
    }
    err.write(`leasehold: ${apiErrorText(e, command ?? 'leasehold')}\n`);
    return isRun ? EXIT.runFailed : EXIT.error;
  }
}
