// A stand-in for a cloud's machine API, run inside the real node's network
// namespace: POST /acquire and POST /release run e2e/providers/sshd-machine.sh,
// whose sshd then listens on the node's address, reachable from pods as a rented
// machine is. The controller reaches this service through netns-machine.sh, a
// provider script mounted from the chart's providerScripts ConfigMap. Each run's
// start and end go to <machines-dir>/.journal ("<ms> <verb>-start <id>",
// "<ms> <verb>-end <id> <code>"), so a test can count acquires and see what
// happened while one ran.
//
//   node machines.mjs <listen-ip> <port> <machines-dir>
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [ip, port, machinesDir] = process.argv.slice(2);
mkdirSync(machinesDir, { recursive: true });
const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'providers', 'sshd-machine.sh');
// Only what the provider contract hands a provider command crosses over.
const passed = /^LEASEHOLD_LEASE_[A-Z_]+$/;

createServer((req, res) => {
  const verb = req.url?.slice(1);
  if (req.method !== 'POST' || (verb !== 'acquire' && verb !== 'release')) {
    res.writeHead(404).end();
    return;
  }
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    let env;
    let delay;
    try {
      const parsed = JSON.parse(body);
      env = Object.fromEntries(Object.entries(parsed.env ?? {}).filter(([k, v]) => passed.test(k) && typeof v === 'string'));
      delay = Number(parsed.delay ?? 0);
      if (!Number.isInteger(delay) || delay < 0 || delay > 600) throw new Error('delay');
    } catch {
      res.writeHead(400).end();
      return;
    }
    const journal = (what) => appendFileSync(join(machinesDir, '.journal'), `${Date.now()} ${verb}-${what}\n`);
    journal(`start ${env.LEASEHOLD_LEASE_ID}`);
    const child = spawn('bash', [script, verb], {
      env: {
        PATH: process.env.PATH, HOME: process.env.HOME, ...env, SSHD_MACHINE_ADDRESS: ip, LEASEHOLD_MACHINES_DIR: machinesDir,
        ...(delay > 0 && verb === 'acquire' ? { SSHD_MACHINE_ACQUIRE_DELAY: String(delay) } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => {
      journal(`end ${env.LEASEHOLD_LEASE_ID} ${code}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ code: code ?? 1, stdout, stderr }));
    });
  });
}).listen(Number(port), ip, () => console.log('machines ready'));
process.on('SIGTERM', () => process.exit(0));
