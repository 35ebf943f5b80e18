// Provider faults: the Lambda emulator answers 5xx, 429, drops answers and
// delays them past the client's 30 s timeout at set rates, and sshd machines
// lose their SSH connections (sessions killed, sshd restarted) while the
// agent is being installed. Every Lease converges and is deleted; nothing is
// leaked or doubled. LEASEHOLD_SOAK=1 raises the rates and the Lease count.
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { alive, calls, commandLedger, lambdaLedger, pgrep, ppidOf, report, runLifecycles, sleep, sshdSampler, until, type Restartable } from '../support/chaos.js';
import { harness, processesLeft, type Harness } from './harness.js';

const SOAK = process.env.LEASEHOLD_SOAK === '1';
let h: Harness;
let ctl: Restartable;

beforeAll(async () => {
  h = await harness('faults');
  ctl = h.controller();
  await ctl.up();
}, 120_000);

afterAll(async () => {
  await h?.cleanup([ctl]);
  const left = h ? processesLeft(h, [ctl]) : [];
  if (left.length) throw new Error(`processes left: ${left.join(', ')}`);
});

const phases = (m: Map<string, string>) => [...m.values()].reduce<Record<string, number>>((a, p) => ((a[p] = (a[p] ?? 0) + 1), a), {});

describe('provider faults', () => {
  it('Lambda 5xx, 429, dropped answers and answers later than the client timeout: all converge, nothing leaked or doubled', async () => {
    const k = SOAK ? 2 : 1;
    const key = h.apiKey;
    // The first launch is held 33 s, past the client's 30 s timeout: the
    // client gives up and watches the name for the settle period (40 s here),
    // where the held launch lands and is adopted, rather than ask again and
    // make a second instance.
    h.emu.fault({ op: 'launch', mode: 'delay', ms: 33_000, times: 1, apiKey: key });
    // Where the launch sequence can ride them out (lost answers, 429s, polls,
    // terminations), at high rates; everywhere else a low rate, since a 5xx
    // answered to a listing fails that launch at once (and must still end clean).
    h.emu.fault({ op: 'launch', mode: 'drop', rate: 0.3 * k, apiKey: key });
    h.emu.fault({ op: 'launch', mode: 'status', status: 429, rate: 0.2 * k, apiKey: key });
    h.emu.fault({ op: 'launch', mode: 'status', status: 502, rate: 0.1 * k, apiKey: key });
    h.emu.fault({ op: 'get-instance', mode: 'status', status: 503, rate: 0.25 * k, apiKey: key });
    h.emu.fault({ op: 'get-instance', mode: 'drop', rate: 0.15 * k, apiKey: key });
    h.emu.fault({ op: 'terminate', mode: 'status', status: 500, rate: 0.3 * k, apiKey: key });
    h.emu.fault({ op: 'terminate', mode: 'drop', rate: 0.3 * k, apiKey: key });
    h.emu.fault({ op: 'list-instances', mode: 'status', status: 503, rate: 0.2 * k, apiKey: key });
    h.emu.fault({ op: 'any', mode: 'delay', ms: 1500, rate: 0.15 * k, apiKey: key });
    h.emu.fault({ op: 'any', mode: 'status', status: 503, rate: 0.03 * k, apiKey: key });
    const n = SOAK ? 14 : 6;
    const t0 = Date.now();
    let run;
    try {
      run = await runLifecycles(h.api, h.ns, Array.from({ length: n }, (_, i) => `lf-${i}`), { where: 'cpus>=1', offer: h.lambdaOffer }, SOAK ? 900_000 : 200_000);
    } finally {
      h.emu.clearFaults();
    }
    await until('Lambda instances terminated', () => h.emu.instances(key).every((i) => i.status === 'terminated'), 20_000, 100).catch(() => undefined);
    const led = lambdaLedger(h.emu, key);
    const hits = h.emu.requests.filter((r) => r.fault).reduce<Record<string, number>>((a, r) => ((a[`${r.fault}${r.fault === 'status' ? r.status : ''}`] = (a[`${r.fault}${r.fault === 'status' ? r.status : ''}`] ?? 0) + 1), a), {});
    const p = phases(run.settled);
    report('faults/lambda', {
      leases: n,
      ready: p.Ready ?? 0,
      failed: p.Failed ?? 0,
      requests: h.emu.requests.length,
      faulted: Object.entries(hits).map(([f, c]) => `${f}:${c}`).join(','),
      launches: h.emu.launches.length,
      instances: led.instances,
      leaked: led.leaked,
      doubled: led.doubled,
      seconds: Math.round((Date.now() - t0) / 1000),
    });
    expect(led.detail).toEqual([]);
    // The held launch and the other faults really happened, and machines were made.
    expect(h.emu.requests.some((r) => r.op === 'launch' && r.fault === 'delay')).toBe(true);
    expect(led.instances).toBeGreaterThan(0);
  }, SOAK ? 1_000_000 : 260_000);

  it('SSH dropped mid-install (sessions killed, sshd restarted): all converge, nothing leaked or doubled', async () => {
    const n = SOAK ? 12 : 6;
    const sampler = sshdSampler(h.machines);
    let cut = 0;
    let restarted = 0;
    let running = true;
    // While Leases are Launching, cut their machines' connections: kill the
    // per-connection sshd processes (the agent install's sessions), or
    // restart the listener on the same port.
    const chaos = (async () => {
      while (running) {
        await sleep(150 + Math.random() * 300);
        const items = await h.api.list(h.ns).catch(() => []);
        for (const l of items) {
          if (l.status?.phase !== 'Launching' || !l.status?.providerState) continue;
          const id = l.status.leaseID as string;
          const dir = join(h.machines, id);
          const listener = pgrep(`${dir}/sshd_config`)[0];
          if (!listener) continue;
          const children = pgrep(`sshd:`).filter((pid) => ppidOf(pid) === listener);
          if (children.length && Math.random() < 0.7) {
            for (const c of children) tryKill(c);
            cut += children.length;
          } else if (Math.random() < 0.3) {
            tryKill(listener, 'SIGTERM');
            await until('listener gone', () => pgrep(`${dir}/sshd_config`).length === 0, 5000, 20).catch(() => undefined);
            try {
              execFileSync('/usr/sbin/sshd', ['-f', `${dir}/sshd_config`, '-E', `${dir}/sshd.log`]);
              restarted++;
            } catch {
              // the directory went away: the Lease was released meanwhile
            }
          }
        }
      }
    })();
    const t0 = Date.now();
    let run;
    try {
      run = await runLifecycles(h.api, h.ns, Array.from({ length: n }, (_, i) => `sf-${i}`), { where: 'cpus>=1', offer: h.commandOffer }, SOAK ? 900_000 : 150_000);
    } finally {
      running = false;
      await chaos;
    }
    // A restart that raced a release would leave an sshd: wait for the provider, then count.
    await until('provider commands ended', () => calls(h.machines).filter((c) => c.event === 'start').every((c) => !alive(c.pid)), 30_000).catch(() => undefined);
    await sleep(500);
    sampler.stop();
    const led = commandLedger(h.machines, sampler.max);
    const p = phases(run.settled);
    report('faults/ssh', { leases: n, ready: p.Ready ?? 0, failed: p.Failed ?? 0, sessionsCut: cut, sshdRestarted: restarted, leaked: led.leaked, doubled: led.doubled, seconds: Math.round((Date.now() - t0) / 1000) });
    expect(led.detail).toEqual([]);
    expect(cut + restarted).toBeGreaterThan(0);
  }, SOAK ? 1_000_000 : 200_000);
});

function tryKill(pid: number, sig: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone
  }
}
