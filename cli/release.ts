// leasehold release NAME [--wait]: ends a Lease now. Deleting it is the
// release: the controller's finalizer releases the machine before the Lease
// goes away, whatever phase it is in.
import { commonFlags, parseCommand, positionals } from './flags.js';
import { connect } from './kube.js';
import type { Out } from './leases.js';
import { EXIT, ExitError } from './exit-codes.js';

export const RELEASE_USAGE = 'usage: leasehold release NAME [--wait] [-n NAMESPACE]';

export async function release(args: string[], out: Out, env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals: pos } = parseCommand(args, { wait: { type: 'boolean' } }, RELEASE_USAGE);
  if (values.help) return void out.write(`${RELEASE_USAGE}\n`), 0;
  const [name] = positionals(pos, ['NAME'], RELEASE_USAGE) as [string];
  const cluster = await connect(commonFlags(values), env);
  if (!(await cluster.leases.delete(cluster.namespace, name))) throw new ExitError(`Lease ${name} not found in namespace ${cluster.namespace}; leasehold leases lists them`, EXIT.error);
  if (!values.wait) {
    out.write(`Lease ${name}: release requested; the controller releases its machine, then the Lease is gone (--wait waits for that)\n`);
    return EXIT.ok;
  }
  while (await cluster.leases.get(cluster.namespace, name)) await new Promise((r) => setTimeout(r, 500));
  out.write(`Lease ${name}: released\n`);
  return EXIT.ok;
}
