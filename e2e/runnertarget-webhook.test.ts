// RunnerTarget on the job's heartbeat: with a long periodic check (1h, 6
// min in tests), a job queued in a followed repository reaches the
// controller as a signed workflow_job webhook from the GitHub emulator's
// repository hook, and its runner host is launched and registered long
// before the next periodic check, and with the launch's follow-up check a
// minute away: the runner config goes to the host as soon as its VM runs.
// A hook whose secret is not the target's is answered 401, counted, and
// starts no check.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from './fakes/lambda/machine.js';
import type { ControllerProcess } from './support/controller.js';
import { apply, waitFor } from './support/kube.js';
import { startRunnerTargetWorld, type RunnerTargetWorld } from './support/runnertarget-crash.js';

let w: RunnerTargetWorld;
let controller: ControllerProcess;
let hookURL: string;
const SECRET = 'a-webhook-secret-only-github-and-the-target-know';
const JOB = [{ labels: ['self-hosted', 'linux'] }];
/** checkInterval 1h under the tests' interval scale (0.1). */
const PERIODIC_MS = 360_000;
/** --runner-follow-up: far longer than a VM of the emulator takes to boot. */
const FOLLOW_UP_MS = 60_000;

beforeAll(async () => {
  const port = await freePort();
  hookURL = `http://127.0.0.1:${port}/github/webhook`;
  w = await startRunnerTargetWorld('rtwebhook', ['--github-webhook-port', String(port), '--runner-follow-up', `${FOLLOW_UP_MS}ms`]);
  await apply(w.kubectl, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gh-hook', namespace: w.ns }, stringData: { secret: SECRET } }));
  controller = await w.startController();
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

async function createHook(repo: string, secret: string): Promise<number> {
  w.gh.addRepository(repo);
  const res = await fetch(`${w.gh.url}/repos/${w.gh.org}/${repo}/hooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.gh.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'web', active: true, events: ['workflow_job'], config: { url: hookURL, content_type: 'json', secret } }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: number }).id;
}

/** The spec of a target following `repo` whose webhook secret is the gh-hook Secret's. */
const hooked = (repo: string) => ({ github: { org: w.gh.org, repositories: [`${w.gh.org}/${repo}`], tokenSecretRef: { name: 'gh-token' }, apiURL: w.gh.url, webhookSecretRef: { name: 'gh-hook' } } });

const deliveriesOf = (hookId: number) => w.gh.hookDeliveries().filter((d) => d.hook_id === hookId);

async function checkedOnce(name: string): Promise<number> {
  const t = await waitFor(`${name} checked`, async () => {
    const t = await w.get(name);
    return t?.status?.lastCheckAt && t.status.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True') ? t : undefined;
  }, 60_000, 200);
  return Date.parse(t.status.lastCheckAt);
}

describe('a workflow_job webhook', () => {
  it('a queued job gets its runner host launched and registered long before the next periodic check', async () => {
    await w.target('hooked', 'hooked', hooked('hooked'));
    const firstCheck = await checkedOnce('hooked');
    const hook = await createHook('hooked', SECRET);
    // GitHub pings a new hook; the controller answers it once the signature is the target's.
    await waitFor('the ping answered', async () => deliveriesOf(hook).find((d) => d.event === 'ping' && d.status_code === 200), 30_000, 100);

    const queued = Date.now();
    w.gh.queueRun('hooked', JOB);
    const launched = await waitFor('a VM launched for the queued job', async () => (w.vmsOf('hooked').length ? Date.now() : undefined), 60_000, 100);
    const registered = await waitFor('its runner online', async () => (w.runnersOf('hooked').some((r) => r.status === 'online') ? Date.now() : undefined), 120_000, 100);
    const nextPeriodic = firstCheck + PERIODIC_MS;
    console.log(`runnertarget webhook: queued -> VM insert ${launched - queued} ms, queued -> runner online ${registered - queued} ms; the next periodic check was due ${nextPeriodic - queued} ms after the job was queued, the launch's follow-up check ${FOLLOW_UP_MS} ms after its launch`);
    expect(launched).toBeLessThan(nextPeriodic);
    expect(registered).toBeLessThan(nextPeriodic);
    expect(launched - queued).toBeLessThan(30_000);
    // The runner config went when the VM ran (the boot watch), not at the launch's follow-up check.
    expect(registered - queued).toBeLessThan(FOLLOW_UP_MS / 4);
    const delivered = deliveriesOf(hook).find((d) => d.event === 'workflow_job' && d.action === 'queued');
    expect(delivered).toMatchObject({ status_code: 202 });
    expect(delivered!.request.headers).toMatchObject({ 'x-github-event': 'workflow_job', 'user-agent': expect.stringMatching(/^GitHub-Hookshot\//), 'x-hub-signature-256': expect.stringMatching(/^sha256=/) });
    expect(await controller.metric('leasehold_github_webhook_deliveries_total', { result: 'accepted' })).toBeGreaterThanOrEqual(1);
    expect(await controller.metric('leasehold_github_webhook_deliveries_total', { result: 'ping' })).toBeGreaterThanOrEqual(1);
  }, 240_000);

  it('a delivery signed with another secret is answered 401, counted, and starts no check', async () => {
    await w.target('forged', 'forged', hooked('forged'));
    const firstCheck = await checkedOnce('forged');
    const unauthorized = await controller.metric('leasehold_github_webhook_deliveries_total', { result: 'unauthorized' });
    const hook = await createHook('forged', 'not-the-secret');
    await waitFor('the ping refused', async () => deliveriesOf(hook).find((d) => d.event === 'ping' && d.status_code === 401), 30_000, 100);
    w.gh.queueRun('forged', JOB);
    await waitFor('the queued delivery refused', async () => deliveriesOf(hook).find((d) => d.action === 'queued' && d.status_code === 401), 30_000, 100);
    expect(await controller.metric('leasehold_github_webhook_deliveries_total', { result: 'unauthorized' })).toBe(unauthorized + 2);
    // A signed delivery for another target is served after it; a check the forged one had asked for would have run by then.
    const served = () => w.gh.hookDeliveries().filter((d) => d.action === 'queued' && d.status_code === 202);
    const before = served().length;
    // This delivery may come within 5 s of the first test's (coalesced): that check read its jobs already, so one more follows when the gap ends, not at the launch's follow-up a minute on.
    const askedAt = Date.now();
    const hookedAt = (await w.get('hooked'))?.status?.lastCheckAt;
    w.gh.queueRun('hooked', JOB);
    await waitFor('the signed delivery answered', async () => served()[before], 30_000, 100);
    await waitFor('hooked checked after it', async () => (await w.get('hooked'))?.status?.lastCheckAt !== hookedAt, 60_000, 200);
    expect(Date.now() - askedAt).toBeLessThan(FOLLOW_UP_MS / 2);
    expect(w.vmsOf('forged')).toEqual([]);
    expect(Date.parse((await w.get('forged')).status.lastCheckAt)).toBe(firstCheck);
  }, 240_000);
});
