// RunnerTarget machine-type tiers from pressure read over SSH on busy hosts,
// and GitHub App credentials end to end. The hosts show /proc/pressure files
// the test writes (support/runnertarget.ts, pressureFiles); samples count
// 4.5 to 6.75 s apart (--runner-sample-window-scale 0.015), so checks 3 s
// apart give a counted sample about every 4.5 s.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { privateKeyFrom, signJwt } from '../src/providers/jwt.js';
import { apply, getJSON, waitFor } from './support/kube.js';
import { startRunnerTargetPool, targetSpec, type HostPressure, type RunnerTargetPool } from './support/runnertarget.js';

const SMALL = 'e2-standard-4';
const LARGE = 'e2-standard-8';
const TIERS = [{ machineType: SMALL, pricePerHour: 0.05 }, { machineType: LARGE, pricePerHour: 0.1 }];
/** Above the controller's "high" CPU threshold (some avg60 50%). */
const HIGH: HostPressure = { cpu: 80, memory: 0.5, io: 1 };
/** Below every "low" threshold (CPU 10%, memory 1%, I/O 5%). */
const LOW: HostPressure = { cpu: 2, memory: 0.2, io: 0.5 };

let pool: RunnerTargetPool;

beforeAll(async () => {
  pool = await startRunnerTargetPool('rttiers', { pressureFiles: true, sampleWindowScale: 0.015 });
});

afterAll(async () => {
  await pool?.stop();
});

afterEach(async () => {
  pool.onRunner = undefined;
  await pool.quiet();
});

const labelled = (name: string, n: number) => Array.from({ length: n }, () => ({ labels: ['self-hosted', 'linux', name] }));
const base = (repo: string) => targetSpec(pool.gce, pool.gh, repo) as { github: Record<string, unknown>; gce: Record<string, unknown> };
const insertsOf = (name: string) => pool.gce.inserts().filter((r) => r.name.startsWith(`${name}-`));

describe('RunnerTarget tiers and credentials', () => {
  it('pressure on busy hosts moves the pool up a tier after two counted samples agree, and down after six calm ones; each launch uses the tier of its check', async () => {
    // Every host's runner takes a job at once, its pressure files showing what the test says at that moment.
    let level = HIGH;
    pool.onRunner = (host) => {
      if (!host.startsWith('tiers-')) return;
      pool.setPressure(host, level);
      pool.takeJob(host);
    };
    const tiers: { machineType: string; high: number; low: number; cpu?: number }[] = [];
    /** Waits for status.tier to be `machineType`, keeping every tier seen on the way. */
    const tierReaches = (machineType: string, timeoutMs: number) =>
      waitFor(`status.tier ${machineType}`, async () => {
        const t = await pool.get('tiers');
        const tier = t?.status?.tier;
        if (tier) tiers.push({ machineType: tier.machineType, high: tier.high, low: tier.low, cpu: t.status.lastSample?.pressure?.cpu });
        return tier?.machineType === machineType && tier.changedAt ? t : undefined;
      }, timeoutMs, 300);
    const nthInsert = (n: number) => waitFor(`launch ${n} at Compute Engine`, async () => insertsOf('tiers')[n - 1], 90_000, 300);

    pool.gh.queueRun('tiers', labelled('tiers', 1));
    await pool.target('tiers', 'tiers', { github: { ...base('tiers').github, labels: ['tiers'] }, gce: { ...base('tiers').gce, machineTypeTiers: TIERS }, maxHosts: 3, checkInterval: '30s' });
    const first = await nthInsert(1);
    expect(first.machineType).toBe(SMALL);

    // Up: one counted sample with high pressure is not enough; the second moves the pool.
    const up = await tierReaches(LARGE, 120_000);
    expect(tiers).toContainEqual({ machineType: SMALL, high: 1, low: 0, cpu: HIGH.cpu });
    expect(tiers.filter((t) => t.machineType === SMALL).every((t) => t.high <= 1)).toBe(true);
    expect(up.status.tier).toMatchObject({ machineType: LARGE, high: 0, low: 0 });
    expect(up.status.lastSample.pressure).toMatchObject({ cpu: HIGH.cpu, memory: HIGH.memory, io: HIGH.io, hosts: 1 });
    const tierUp = (await pool.events('tiers')).filter((e) => e.reason === 'TierUp');
    expect(tierUp.map((e) => e.message)).toEqual([`2 counted samples in a row with high pressure on busy hosts: the pool moves up from ${SMALL} to ${LARGE}`]);

    // A job more: its host is launched on the larger tier.
    pool.gh.queueRun('tiers', labelled('tiers', 1));
    const second = await nthInsert(2);
    expect(second.machineType).toBe(LARGE);

    // Down: every busy host calm, six counted samples in a row.
    level = LOW;
    for (const name of pool.machines.keys()) if (name.startsWith('tiers-')) pool.setPressure(name, LOW);
    tiers.length = 0;
    const down = await tierReaches(SMALL, 150_000);
    expect(tiers).toContainEqual({ machineType: LARGE, high: 0, low: 5, cpu: LOW.cpu });
    expect(down.status.tier).toMatchObject({ machineType: SMALL, high: 0, low: 0 });
    expect(Date.parse(down.status.tier.changedAt)).toBeGreaterThan(Date.parse(up.status.tier.changedAt));
    const tierDown = (await pool.events('tiers')).filter((e) => e.reason === 'TierDown');
    expect(tierDown.map((e) => e.message)).toEqual([`6 counted samples in a row with low pressure on busy hosts: the pool moves down from ${LARGE} to ${SMALL}`]);

    pool.gh.queueRun('tiers', labelled('tiers', 1));
    const third = await nthInsert(3);
    expect(third.machineType).toBe(SMALL);

    // Compute Engine's log and the receipts agree: one launch per tier the pool was on.
    expect(insertsOf('tiers').map((r) => [r.refused ?? 'made', r.zone, r.machineType])).toEqual([
      ['made', 'us-central1-a', SMALL],
      ['made', 'us-central1-a', LARGE],
      ['made', 'us-central1-a', SMALL],
    ]);
    const t = await pool.get('tiers');
    expect(t.status.receipts.filter((r: any) => r.action === 'Launch').map((r: any) => [r.hosts[0], r.machineType])).toEqual([
      [first.name, SMALL],
      [second.name, LARGE],
      [third.name, SMALL],
    ]);
    const hosts = Object.fromEntries(t.status.hosts.map((h: any) => [h.name, [h.machineType, h.pricePerHour]]));
    expect(hosts).toEqual({ [first.name]: [SMALL, 0.05], [second.name]: [LARGE, 0.1], [third.name]: [SMALL, 0.05] });
    expect(t.status.plan.machineType).toBe(SMALL);
  }, 300_000);

  it('GitHub App credentials: the controller calls GitHub with installation tokens made from the App key; a queued job gets a host whose runner registers and runs it; neither key nor token shows anywhere', async () => {
    const { app } = pool.gh;
    await apply(pool.kubectl, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'gh-app', namespace: pool.ns },
      stringData: { appID: String(app.appId), installationID: String(app.installationId), privateKey: app.privateKey },
    }));
    pool.onRunner = (host) => {
      if (host.startsWith('app-')) pool.takeJob(host);
    };
    const { jobIds } = pool.gh.queueRun('app', labelled('app', 1));
    const { tokenSecretRef: _token, ...github } = base('app').github;
    await pool.target('app', 'app', { github: { ...github, labels: ['app'], appSecretRef: { name: 'gh-app' } }, maxHosts: 1, checkInterval: '30s' });

    const job = await waitFor('the job running on a host of the pool', async () => pool.gh.jobs().find((j) => j.id === jobIds[0] && j.status === 'in_progress'), 120_000, 300);
    expect(job.runner_name).toMatch(/^app-/);
    const t = await waitFor('the launch Done', async () => {
      const got = await pool.get('app');
      return got?.status?.receipts?.some((r: any) => r.action === 'Launch' && r.phase === 'Done') ? got : undefined;
    }, 60_000, 300);
    expect(pool.runnersOf('app')).toEqual([expect.objectContaining({ name: job.runner_name, status: 'online' })]);
    expect(pool.vmsOf('app').map((v) => v.name)).toEqual([job.runner_name]);

    // The App's JWT went only to the token endpoint; everything else of this target went as the installation.
    const installation = `installation:${app.installationId}`;
    const tokens = pool.gh.requests.filter((r) => r.op === 'access-token');
    expect(tokens.length).toBeGreaterThanOrEqual(1);
    expect(tokens.map((r) => [r.account, r.status])).toEqual(tokens.map(() => [`app:${app.appId}`, 201]));
    const repoCalls = pool.gh.requests.filter((r) => r.path.startsWith(`/repos/${pool.gh.org}/app/`));
    expect(repoCalls.length).toBeGreaterThan(0);
    expect(new Set(repoCalls.map((r) => r.account))).toEqual(new Set([installation]));
    expect(pool.gh.requests.filter((r) => r.op === 'generate-jitconfig' && r.account === installation).length).toBeGreaterThanOrEqual(1);

    // Neither the App's private key, nor a JWT it signed, nor an installation token, in the log, events, status or metrics.
    const places = {
      'controller log': readFileSync(pool.controller.logFile, 'utf8'),
      events: JSON.stringify((await getJSON(pool.kubectl, ['events', '-n', pool.ns]))?.items ?? []),
      'RunnerTarget': JSON.stringify(t),
      metrics: await (await fetch(pool.controller.metricsURL)).text(),
    };
    expect(places['controller log'].length).toBeGreaterThan(0);
    expect(places.events).toContain(job.runner_name);
    const keyLines = app.privateKey.split('\n').filter((l) => l && !l.startsWith('-----'));
    expect(keyLines.length).toBeGreaterThan(10);
    // The patterns below find what they look for: a JWT of the App, and the installation token GitHub gives for it.
    const now = Math.floor(Date.now() / 1000);
    const jwt = signJwt({ iat: now - 60, exp: now + 300, iss: String(app.appId) }, privateKeyFrom(app.privateKey, 'the App key'));
    const minted = await fetch(`${pool.gh.url}/app/installations/${app.installationId}/access_tokens`, { method: 'POST', headers: { authorization: `Bearer ${jwt}` } });
    const token = ((await minted.json()) as { token: string }).token;
    expect(`${jwt} ${token}`.match(/ghs_[0-9a-f]{36}|eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+/g)).toEqual([jwt, token]);
    for (const [where, text] of Object.entries(places)) {
      expect({ where, key: keyLines.filter((l) => text.includes(l)) }).toEqual({ where, key: [] });
      expect({ where, pem: text.includes('PRIVATE KEY') }).toEqual({ where, pem: false });
      // The emulator's installation tokens are ghs_ and 36 hex digits; an App JWT is three base64url parts, the first two JSON.
      expect({ where, tokens: text.match(/ghs_[0-9a-f]{36}/g) ?? [] }).toEqual({ where, tokens: [] });
      expect({ where, jwts: text.match(/eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+/g) ?? [] }).toEqual({ where, jwts: [] });
    }
  }, 240_000);
});
