// A tenant who may patch leases/status (a Role on leasehold.dev "*" in their
// namespace) tries to make the controller act for them: run a command,
// send an API key to their own server, install their keys on another
// Lease's machine. The chart's admission policy, which forbids such writes,
// is not installed in this plain control plane: the controller itself must
// hold, acting on its own record of each Lease, never on status. And a
// machine whose Lease an admin deleted without its release is released from
// that record.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apply, getJSON, waitFor } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';
import { namespaceUser } from './support/tenancy.js';

const fx = leaseSuite('tamper', { maxLeases: 3 });
const tenant = (args: string[]) => fx.kubectl(['--as=mallory', '--as-group=tenants', '-n', fx.ns, ...args]);
const dir = mkdtempSync(join(tmpdir(), 'leasehold-tamper-'));
const device = (name: string) => {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', join(dir, name)]);
  return readFileSync(join(dir, `${name}.pub`), 'utf8').trim();
};

/** Requests the tenant's own server received. */
const received: string[] = [];
let server: Server;
let serverURL: string;

beforeAll(async () => {
  await namespaceUser(fx.kubectl, fx.ns, 'mallory');
  server = createServer((req, res) => {
    received.push(`${req.method} ${req.url} authorization=${req.headers.authorization ?? ''}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[]}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serverURL = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  await new Promise((r) => server?.close(r));
});

const events = async (name: string, reason: string, namespace = fx.ns) =>
  ((await getJSON(fx.kubectl, ['-n', namespace, 'events', '--field-selector', `involvedObject.name=${name}`]))?.items ?? []).filter((e: any) => e.reason === reason);

async function readyLease(name: string, sshKeys: string[] = []): Promise<any> {
  const offer = await fx.offer(name, { ...sshdCommands(), idleTimeout: '10m', maxLifetime: '1h' });
  await fx.lease(name, { where: 'cpus>=1', offer, sshKeys });
  return fx.waitPhase(name, 'Ready');
}

async function patchStatus(name: string, status: Record<string, unknown>): Promise<void> {
  const r = await tenant(['patch', 'leases.leasehold.dev', name, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
  if (r.code !== 0) throw new Error(`the tenant's status patch was refused: ${r.stderr}`);
}

async function tenantDeletes(name: string): Promise<void> {
  expect((await tenant(['delete', 'leases.leasehold.dev', name, '--wait=false'])).code).toBe(0);
  await waitFor(`Lease ${name} gone`, async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', name])) === undefined, 60_000, 250);
}

describe('a tenant who may write Lease status', () => {
  it('cannot choose the release command: the machine is released the way it was made, and the command never runs', async () => {
    const st = await readyLease('cmd');
    const canary = join(dir, 'canary');
    await patchStatus('cmd', { release: { provider: 'command', command: ['/bin/sh', '-c', `touch ${canary}`] } });
    await tenantDeletes('cmd');
    expect(existsSync(canary)).toBe(false);
    expect(fx.sshdFor(st.leaseID)).toBe('');
    const [event] = await events('cmd', 'StatusTampered');
    expect(event.type).toBe('Warning');
    expect(event.message).toMatch(/status\.release changed by someone other than the controller/);
  });

  it('cannot send another Secret to a server of their choosing', async () => {
    await apply(fx.kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'someone-elses-key', namespace: fx.ns }, stringData: { apiKey: 'secret-0123456789' } }));
    const st = await readyLease('exfil');
    await patchStatus('exfil', { release: { provider: 'lambda', lambda: { apiKeySecretRef: { name: 'someone-elses-key', namespace: fx.ns, key: 'apiKey' }, endpoint: serverURL } } });
    await tenantDeletes('exfil');
    expect(received).toEqual([]);
    expect(fx.sshdFor(st.leaseID)).toBe('');
    expect(await events('exfil', 'StatusTampered')).toHaveLength(1);
  });

  it("cannot point the controller at another Lease's machine to install their keys there", async () => {
    const victim = await readyLease('victim', [device('victim')]);
    const attackerKey = device('attacker');
    const attacker = await readyLease('attacker', [attackerKey]);
    const victimKeys = join(fx.machines, victim.leaseID, 'authorized_keys');
    const before = readFileSync(victimKeys, 'utf8');
    // A bogus installedKeysHash makes the next check write the attacker's spec.sshKeys wherever status.machine points.
    await patchStatus('attacker', { machine: victim.machine, installedKeysHash: '0000000000000000' });
    // Several checks (one a second) after the patch.
    const passes = await fx.controller.metric('leasehold_reconcile_total', { controller: 'lease' });
    await waitFor('three more reconciles', async () => (await fx.controller.metric('leasehold_reconcile_total', { controller: 'lease' })) > passes + 3, 30_000, 250);
    expect(readFileSync(victimKeys, 'utf8')).toBe(before);
    const ssh = victim.machine.ssh;
    const login = spawnSync('ssh', ['-i', join(dir, 'attacker'), '-o', 'IdentitiesOnly=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'BatchMode=yes',
      '-p', String(ssh.port), `${ssh.user}@${ssh.host}`, 'echo in'], { encoding: 'utf8', timeout: 20_000 });
    expect(login.stdout.trim()).not.toBe('in');
    // Seen, reported once, and undone.
    expect(await events('attacker', 'StatusTampered')).toHaveLength(1);
    expect((await fx.status('attacker')).machine).toEqual(attacker.machine);
    await tenantDeletes('attacker');
    await tenantDeletes('victim');
    expect(fx.sshdFor(attacker.leaseID)).toBe('');
    expect(fx.sshdFor(victim.leaseID)).toBe('');
  });
});

describe('a Lease deleted after an admin removed its finalizer', () => {
  it('has its machine released from the controller record', async () => {
    const st = await readyLease('vanish');
    const uid = (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', 'vanish'])).metadata.uid;
    const record = `leasehold-lease-${uid}`;
    expect(await getJSON(fx.kubectl, ['-n', fx.ns, 'secret', record])).toBeDefined();
    const strip = await fx.kubectl(['-n', fx.ns, 'patch', 'leases.leasehold.dev', 'vanish', '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]']);
    expect(strip.code).toBe(0);
    expect((await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'vanish', '--timeout=20s'])).code).toBe(0);
    await waitFor('the machine released', async () => fx.sshdFor(st.leaseID) === '', 30_000, 250);
    await waitFor('the record deleted', async () => (await getJSON(fx.kubectl, ['-n', fx.ns, 'secret', record])) === undefined, 30_000, 250);
    expect(await events(record, 'LeaseVanished')).toHaveLength(1);
    await waitFor('ReleasedFromRecord', async () => (await events(record, 'ReleasedFromRecord')).length === 1, 10_000, 250);
  });
});
