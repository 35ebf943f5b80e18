// The Grafana dashboard against real data: the real controller runs Leases
// on sshd and broken command Offers through a lifecycle (Ready, delete with a
// release that fails once, an acquire that fails, a control plane restart
// mid-launch), then every panel target of charts/leasehold/dashboards/leasehold.json
// is checked against the controller's /metrics: each metric selector of its
// PromQL has at least one matching sample (histograms with observations), and
// instant gauge aggregations are evaluated. No Grafana binary is used.
// This run lends nothing and runs no RunnerTarget, so the PeerFleet and
// RunnerTarget rows are checked apart: against their metrics' names, types,
// labels and label values, and against what the controller's own metrics
// expose for a fleet that lends and a pool with hosts.
//
// This file runs its own control plane (restarted once, for informer restarts
// and reconcile errors), so it never disturbs the shared one.
import { describe, it, expect } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { DRAIN_REASONS } from '../controllers/peerfleet/policy/drain.js';
import { PeerFleetMetrics } from '../controllers/peerfleet/metrics.js';
import { FINAL_CHECK_STATES } from '../controllers/runnertarget/machine.js';
import { RunnerTargetMetrics } from '../controllers/runnertarget/metrics.js';
import { HOST_STATES, RECEIPT_ACTIONS, RUNNER_HOST_STATES, type PeerFleet, type RunnerTarget } from '../src/api/index.js';
import { ControlPlane } from './cluster/controlplane.js';
import { peerFleetManifest, runnerTargetManifest } from './support/builders.js';
import { waitFor } from './support/kube.js';
import { BAD_TARGET_PROVIDER, sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';

// ---- Prometheus text format and a PromQL subset ----

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
    }
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

interface Matcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}
interface Selector {
  metric: string;
  matchers: Matcher[];
  text: string;
}

/** Grafana's variables as the dashboard's defaults (All) expand them. */
function expandVariables(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, '1m').replace(/\$\{?(job|instance)\}?/g, '.*');
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset']);

/** Every metric selector in a PromQL expression (functions, aggregations, grouping labels and ranges skipped). */
export function selectorsOf(expr: string): Selector[] {
  const e = expandVariables(expr)
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '');
  const out: Selector[] = [];
  const re = /([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{(?:[^}"]|"(?:[^"\\]|\\.)*")*\})?(\s*\()?/g;
  for (const m of e.matchAll(re)) {
    const start = m.index!;
    if (start > 0 && /[0-9.]/.test(e[start - 1]!)) continue; // part of a number such as 1e3
    if (m[3]) continue; // a function or aggregation
    if (KEYWORDS.has(m[1]!)) continue;
    const matchers: Matcher[] = [];
    for (const x of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)) {
      matchers.push({ label: x[1]!, op: x[2] as Matcher['op'], value: x[3]!.replace(/\\(.)/g, '$1') });
    }
    out.push({ metric: m[1]!, matchers, text: `${m[1]}${m[2] ?? ''}` });
  }
  return out;
}

/** Whether a sample matches: a label the scrape lacks (job, instance: Prometheus adds them) is "", as in PromQL. */
function matches(s: Sample, sel: Selector): boolean {
  if (s.name !== sel.metric) return false;
  return sel.matchers.every(({ label, op, value }) => {
    const v = s.labels[label] ?? '';
    switch (op) {
      case '=': return v === value;
      case '!=': return v !== value;
      case '=~': return new RegExp(`^(?:${value})$`).test(v);
      case '!~': return !new RegExp(`^(?:${value})$`).test(v);
    }
  });
}

type Vector = { labels: Record<string, string>; value: number }[];

/**
 * An instant evaluator for the gauge subset: a selector, or sum/max/min/count
 * [by (labels)] (inner). Returns undefined for anything else (rate, increase,
 * histogram_quantile need two scrapes, and are only selector-checked).
 */
export function evaluate(expr: string, samples: Sample[]): Vector | undefined {
  const e = expandVariables(expr).trim();
  const agg = /^(sum|max|min|count)\s*(?:by\s*\(([^)]*)\))?\s*\(([\s\S]*)\)$/.exec(e);
  if (agg) {
    const inner = evaluate(agg[3]!, samples);
    if (!inner) return undefined;
    const by = (agg[2] ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    const groups = new Map<string, { labels: Record<string, string>; values: number[] }>();
    for (const s of inner) {
      const labels = Object.fromEntries(by.map((l) => [l, s.labels[l] ?? '']));
      const k = JSON.stringify(labels);
      const g = groups.get(k) ?? { labels, values: [] };
      g.values.push(s.value);
      groups.set(k, g);
    }
    const f = { sum: (v: number[]) => v.reduce((a, b) => a + b, 0), max: (v: number[]) => Math.max(...v), min: (v: number[]) => Math.min(...v), count: (v: number[]) => v.length }[agg[1] as 'sum'];
    return [...groups.values()].map((g) => ({ labels: g.labels, value: f(g.values) }));
  }
  const sels = selectorsOf(e);
  if (sels.length !== 1 || sels[0]!.text.replace(/\s/g, '') !== e.replace(/\s/g, '')) return undefined;
  return samples.filter((s) => matches(s, sels[0]!)).map((s) => ({ labels: s.labels, value: s.value }));
}

/** The labels a panel draws one line per: the first by (...) of the expression, le left out. */
function lineLabels(expr: string): string[] {
  const m = /\bby\s*\(([^)]*)\)/.exec(expr);
  return m ? m[1]!.split(',').map((s) => s.trim()).filter((s) => s && s !== 'le') : [];
}

// ---- the dashboard ----

interface Target { refId: string; expr: string }
interface Panel { type: string; title: string; targets?: Target[]; panels?: Panel[] }
const dashboard = JSON.parse(readFileSync(join(process.cwd(), 'charts/leasehold/dashboards/leasehold.json'), 'utf8'));
// Rows here are not collapsed: a row's panels follow it in the list.
const rowOf = new Map<Panel, string>();
{
  let row = '';
  for (const p of dashboard.panels as Panel[]) {
    if (p.type === 'row') row = p.title;
    for (const q of p.type === 'row' ? p.panels ?? [] : [p]) rowOf.set(q, row);
  }
}
const allPanels = [...rowOf.keys()];
const peerPanels = allPanels.filter((p) => rowOf.get(p) === 'PeerFleet');
const runnerPanels = allPanels.filter((p) => rowOf.get(p) === 'RunnerTarget');
const panels = allPanels.filter((p) => rowOf.get(p) !== 'PeerFleet' && rowOf.get(p) !== 'RunnerTarget');

// ---- the PeerFleet lending metrics: every one has labels namespace and peerfleet ----

type MetricDefs = Record<string, { type: 'gauge' | 'counter'; labels: Record<string, readonly string[] | 'any'> }>;

const PEERFLEET_METRICS: MetricDefs = {
  leasehold_peerfleet_hosts: { type: 'gauge', labels: { state: HOST_STATES } },
  leasehold_peerfleet_lent_gpu_seconds: { type: 'gauge', labels: {} },
  leasehold_peerfleet_lent_amount_usd: { type: 'gauge', labels: {} },
  leasehold_peerfleet_unmeasured_jobs: { type: 'gauge', labels: {} },
  leasehold_peerfleet_sessions_total: { type: 'counter', labels: {} },
  leasehold_peerfleet_claims_total: { type: 'counter', labels: { outcome: ['claimed', 'conflict', 'refused'] } },
  leasehold_peerfleet_drains_total: { type: 'counter', labels: { reason: DRAIN_REASONS } },
  leasehold_peerfleet_writebacks_total: { type: 'counter', labels: { outcome: ['ok', 'error'] } },
};

// ---- the RunnerTarget metrics: every one has labels namespace and runnertarget ----

const RUNNERTARGET_METRICS: MetricDefs = {
  leasehold_runnertarget_hosts: { type: 'gauge', labels: { state: RUNNER_HOST_STATES } },
  leasehold_runnertarget_queued_jobs: { type: 'gauge', labels: {} },
  leasehold_runnertarget_spend_today_usd: { type: 'gauge', labels: {} },
  leasehold_runnertarget_daily_budget_usd: { type: 'gauge', labels: {} },
  leasehold_runnertarget_checks_total: { type: 'counter', labels: { result: FINAL_CHECK_STATES } },
  leasehold_runnertarget_changes_total: { type: 'counter', labels: { action: RECEIPT_ACTIONS, outcome: ['ok', 'failed'] } },
  leasehold_runnertarget_launches_total: { type: 'counter', labels: { zone: 'any', outcome: ['ok', 'failed'] } },
  leasehold_runnertarget_preemptions_total: { type: 'counter', labels: {} },
};

/** What is wrong with a PeerFleet panel query against those definitions; empty when nothing is. */
export function peerFleetQueryProblems(expr: string): string[] {
  return queryProblems(expr, PEERFLEET_METRICS, 'PeerFleet', 'peerfleet');
}

export function runnerTargetQueryProblems(expr: string): string[] {
  return queryProblems(expr, RUNNERTARGET_METRICS, 'RunnerTarget', 'runnertarget');
}

function queryProblems(expr: string, defs: MetricDefs, kind: string, objectLabel: string): string[] {
  const problems: string[] = [];
  const sels = selectorsOf(expr);
  if (sels.length === 0) problems.push('names no metric');
  for (const sel of sels) {
    const def = defs[sel.metric];
    if (!def) {
      problems.push(`${sel.metric} is not a ${kind} metric`);
      continue;
    }
    // Prometheus adds job and instance at scrape time.
    const known = new Set(['namespace', objectLabel, 'job', 'instance', ...Object.keys(def.labels)]);
    for (const m of sel.matchers) {
      if (!known.has(m.label)) problems.push(`${sel.metric} has no label ${m.label}`);
      const values = def.labels[m.label];
      if (!values || values === 'any' || (m.op !== '=' && m.op !== '=~')) continue;
      const re = new RegExp(`^(?:${m.op === '=' ? m.value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : m.value})$`);
      if (!values.some((v) => re.test(v))) problems.push(`${sel.metric}{${m.label}${m.op}"${m.value}"} matches none of ${values.join(', ')}`);
    }
    const grouped = [...expr.matchAll(/\bby\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((l) => l.trim()).filter(Boolean));
    for (const g of new Set(grouped)) if (!known.has(g)) problems.push(`grouped by ${g}, which ${sel.metric} does not have`);
    // A counter only means something as a rate; a gauge's rate means nothing.
    const ratedRe = new RegExp(`\\b(rate|increase)\\(\\s*${sel.metric}\\b`);
    if (def.type === 'counter' && !ratedRe.test(expr)) problems.push(`${sel.metric} is a counter, read without rate() or increase()`);
    if (def.type === 'gauge' && ratedRe.test(expr)) problems.push(`${sel.metric} is a gauge, read with rate() or increase()`);
  }
  return problems;
}

/** The problems of a row's queries, and the metrics they use; a panel without a query is a problem too. */
function rowProblems(row: Panel[], check: (expr: string) => string[]): { problems: string[]; used: Set<string> } {
  const problems: string[] = [];
  const used = new Set<string>();
  for (const p of row) {
    if (!p.targets?.length) problems.push(`${p.title}: no query`);
    for (const t of p.targets ?? []) {
      for (const x of check(t.expr)) problems.push(`${p.title} ${t.refId}: ${x}`);
      for (const sel of selectorsOf(t.expr)) used.add(sel.metric);
    }
  }
  return { problems, used };
}

/** The selectors of a row's queries that no sample matches. */
function unmatched(row: Panel[], samples: Sample[]): string[] {
  return row.flatMap((p) => (p.targets ?? []).flatMap((t) => selectorsOf(t.expr).filter((sel) => !samples.some((x) => matches(x, sel))).map((sel) => `${p.title} ${t.refId}: ${sel.text}`)));
}

// ---- the run ----

let cp: ControlPlane;
let savedKubeconfig: string | undefined;

const fx = leaseSuite('dashboard', {
  acquireTimeout: '120s',
  maxLeases: 4,
  // Leader election off: a replica whose renewals fail through the restart
  // exits by design; the leader gauge is still set (to 1) by the manager.
  controllerArgs: ['--no-leader-elect', '--resync-period', '20s'],
  setupTimeoutMs: 120_000,
  // dash-slow may end Ready, and is left so for the metrics.
  machinesOutliveTests: true,
  async before() {
    cp = await ControlPlane.start({ binDir: process.env.E2E_BIN_DIR });
    const crds = await cp.kubectl(['apply', '--server-side', '-f', join(process.cwd(), 'crds')]);
    expect(crds.code).toBe(0);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s']);
    // The fixture reads the kubeconfig from the environment (this file's copy).
    savedKubeconfig = process.env.E2E_KUBECONFIG;
    process.env.E2E_KUBECONFIG = cp.info.kubeconfig;
  },
  async after() {
    await cp?.stop();
    if (savedKubeconfig !== undefined) process.env.E2E_KUBECONFIG = savedKubeconfig;
  },
});

describe('the Grafana dashboard against a real controller', () => {
  it('PeerFleet panels query the lending metrics, with their labels and label values', () => {
    const titles = peerPanels.map((p) => p.title);
    expect(titles).toEqual(expect.arrayContaining(['Hosts by state', 'Lent GPU-hours', 'Lent amount', 'Lending sessions started', 'Drains by reason', 'Claim conflicts', 'Status write-back errors']));
    const { problems, used } = rowProblems(peerPanels, peerFleetQueryProblems);
    expect(problems).toEqual([]);
    // Every lending metric is on the dashboard.
    expect([...used].sort()).toEqual(Object.keys(PEERFLEET_METRICS).sort());
    // The check can fail: a misspelt metric, an unknown label or value, a counter read as a gauge.
    expect(peerFleetQueryProblems('sum(leasehold_peerfleet_host{state="Lending"})')).toEqual(['leasehold_peerfleet_host is not a PeerFleet metric']);
    expect(peerFleetQueryProblems('sum(leasehold_peerfleet_hosts{state="Lent"})')).toEqual([expect.stringMatching(/matches none of Busy, Waiting/)]);
    expect(peerFleetQueryProblems('sum by (node) (leasehold_peerfleet_hosts)')).toEqual(['grouped by node, which leasehold_peerfleet_hosts does not have']);
    expect(peerFleetQueryProblems('sum(increase(leasehold_peerfleet_drains_total{reason=~"Busy|Idle"}[1m]))')).toEqual([expect.stringMatching(/matches none of Deleted/)]);
    expect(peerFleetQueryProblems('sum(leasehold_peerfleet_sessions_total)')).toEqual(['leasehold_peerfleet_sessions_total is a counter, read without rate() or increase()']);
    expect(peerFleetQueryProblems('rate(leasehold_peerfleet_lent_amount_usd[1m])')).toEqual(['leasehold_peerfleet_lent_amount_usd is a gauge, read with rate() or increase()']);
  });

  it("PeerFleet panels match the series the controller's PeerFleet metrics expose for a lending fleet", async () => {
    const fleet = {
      ...peerFleetManifest('gpu', 'lend', {}),
      status: {
        hosts: [{ node: 'gpu-1', state: 'Lending' }, { node: 'gpu-2', state: 'Draining' }, { node: 'gpu-3', state: 'Available' }],
        accounting: { gpuSeconds: 7200, amountUSD: 4, jobs: 2, unmeasured: 1 },
      },
    } as unknown as PeerFleet;
    const registry = new Registry();
    const m = new PeerFleetMetrics(registry, () => [fleet]);
    const l = { namespace: 'lend', peerfleet: 'gpu' };
    m.sessions.inc(l);
    for (const outcome of ['claimed', 'conflict', 'refused']) m.claims.inc({ ...l, outcome });
    m.drains.inc({ ...l, reason: 'OurWorkRunning' });
    for (const outcome of ['ok', 'error']) m.writebacks.inc({ ...l, outcome });
    const samples = parseExposition(await registry.metrics());

    expect(unmatched(peerPanels, samples)).toEqual([]);
    const one = (title: string) => evaluate(peerPanels.find((p) => p.title === title)!.targets![0]!.expr, samples)?.[0]?.value;
    expect(one('Lending hosts')).toBe(1);
    expect(one('Lent amount')).toBe(4);
    expect(one('Unmeasured peer jobs')).toBe(1);
    expect(evaluate(peerPanels.find((p) => p.title === 'Hosts by state')!.targets![0]!.expr, samples)).toEqual(expect.arrayContaining([
      { labels: { state: 'Lending' }, value: 1 },
      { labels: { state: 'Draining' }, value: 1 },
      { labels: { state: 'Busy' }, value: 0 },
    ]));
  });

  it('RunnerTarget panels query the RunnerTarget metrics, with their labels and label values', () => {
    const titles = runnerPanels.map((p) => p.title);
    expect(titles).toEqual(expect.arrayContaining(['Runner hosts by state', 'Queued jobs by RunnerTarget', 'Launches by zone and outcome', 'Preemptions', 'Spend vs budget']));
    const { problems, used } = rowProblems(runnerPanels, runnerTargetQueryProblems);
    expect(problems).toEqual([]);
    // Every RunnerTarget metric but the per-action changes is on the dashboard (changes are in the events and receipts).
    expect([...used].sort()).toEqual(Object.keys(RUNNERTARGET_METRICS).filter((m) => m !== 'leasehold_runnertarget_changes_total').sort());
    expect(runnerTargetQueryProblems('sum(leasehold_runnertarget_hosts{state="Running"})')).toEqual([expect.stringMatching(/matches none of Launching, Registering/)]);
    expect(runnerTargetQueryProblems('sum by (host) (leasehold_runnertarget_hosts)')).toEqual(['grouped by host, which leasehold_runnertarget_hosts does not have']);
    expect(runnerTargetQueryProblems('sum(leasehold_runnertarget_preemptions_total)')).toEqual(['leasehold_runnertarget_preemptions_total is a counter, read without rate() or increase()']);
  });

  it("RunnerTarget panels match the series the controller's RunnerTarget metrics expose for a pool with hosts", async () => {
    const host = (name: string, state: string) => ({ name, state, zone: 'us-central1-a', machineType: 'n2d-standard-8', pricePerHour: 0.07, createdAt: '2026-12-03T12:00:00Z' });
    const pool = {
      ...runnerTargetManifest('oxidex', 'runners', { dailyBudgetUSD: 10 }),
      status: { hosts: [host('a', 'Idle'), host('b', 'Busy'), host('c', 'Launching')], counts: { hosts: 3, busy: 1, idle: 1, queued: 5 }, spendTodayUSD: 2.5 },
    } as unknown as RunnerTarget;
    const registry = new Registry();
    const m = new RunnerTargetMetrics(registry, () => [pool]);
    const l = { namespace: 'runners', runnertarget: 'oxidex' };
    for (const result of FINAL_CHECK_STATES) m.checks.inc({ ...l, result });
    for (const outcome of ['ok', 'failed']) m.launches.inc({ ...l, zone: 'us-central1-a', outcome });
    m.found(pool, [{ type: 'Warning', reason: 'Preempted', message: 'host d was preempted' }]);
    const samples = parseExposition(await registry.metrics());

    expect(unmatched(runnerPanels, samples)).toEqual([]);
    const panel = (title: string) => runnerPanels.find((p) => p.title === title)!.targets!;
    const one = (title: string) => evaluate(panel(title)[0]!.expr, samples)?.[0]?.value;
    expect(one('Runner hosts')).toBe(3);
    expect(one('Queued runner jobs')).toBe(5);
    expect(one('Runner spend today')).toBe(2.5);
    expect(evaluate(panel('Runner hosts by state')[0]!.expr, samples)).toEqual(expect.arrayContaining([
      { labels: { state: 'Busy' }, value: 1 },
      { labels: { state: 'Launching' }, value: 1 },
      { labels: { state: 'Draining' }, value: 0 },
    ]));
    expect(panel('Spend vs budget').map((t) => evaluate(t.expr, samples))).toEqual([
      [{ labels: { namespace: 'runners', runnertarget: 'oxidex' }, value: 2.5 }],
      [{ labels: { namespace: 'runners', runnertarget: 'oxidex' }, value: 10 }],
    ]);
  });

  it('every panel target matches scraped series, with bounded labels', async () => {
    const offer = (name: string, env: string | undefined, pricePerHour: number) =>
      fx.offer(name, { ...sshdCommands(env), pricePerHour, idleTimeout: '10m', maxLifetime: '1h' });
    const box = await offer('box', undefined, 1.5);
    const flaky = await offer('flaky', 'SSHD_MACHINE_FAIL_RELEASE_TIMES=1', 2);
    const slow = await offer('slow', 'SSHD_MACHINE_ACQUIRE_DELAY=6', 0.25);
    const bad = await fx.offer('bad', { acquire: [BAD_TARGET_PROVIDER, 'acquire', 'nojson'], release: [BAD_TARGET_PROVIDER, 'release'], pricePerHour: 9 });
    await new Promise((r) => setTimeout(r, 1000));

    const names = ['dash-ready', 'dash-flaky', 'dash-bad', 'dash-slow'];
    await fx.lease('dash-ready', { where: 'cpus>=1', offer: box });
    await fx.lease('dash-flaky', { where: 'cpus>=1', offer: flaky });
    await fx.lease('dash-bad', { where: 'cpus>=1', offer: bad });
    // Generous waits: on a loaded CI machine the first launches on a fresh control plane can be slow.
    await fx.waitPhase('dash-ready', 'Ready', 120_000);
    await fx.waitPhase('dash-flaky', 'Ready', 120_000);
    expect((await fx.waitPhase('dash-bad', 'Failed', 120_000)).reason).toBeDefined();

    // Delete: the first release fails (ReleaseFailed, retried after the check interval), the second frees it.
    const del = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'dash-flaky', '--timeout=60s']);
    expect(del.code).toBe(0);

    // The control plane goes away while a launch is in flight: the launch's
    // status write fails (a reconcile error) and every watch restarts.
    await fx.lease('dash-slow', { where: 'cpus>=1', offer: slow });
    await fx.waitPhase('dash-slow', 'Launching');
    await cp.restart(4000);
    const slowEnd = await waitFor('dash-slow Ready or Failed', async () => {
      const s = await fx.status('dash-slow');
      return s?.phase === 'Ready' || s?.phase === 'Failed' ? s : undefined;
    }, 90_000, 500);
    await waitFor('an informer restart', async () => (await fx.controller.metric('leasehold_informer_restarts_total')) > 0, 30_000);
    // leasehold_leases is read from the informer cache, which catches up
    // only once the relist after the outage (with its backoff) has run.
    await waitFor('the cache to see dash-slow end', async () => (await fx.controller.metric('leasehold_leases', { offer: slow, phase: slowEnd.phase })) === 1, 60_000, 500);
    await new Promise((r) => setTimeout(r, 1500)); // one more queue-depth tick

    // Lease identities that must never be label values.
    const ids: string[] = [];
    for (const n of names) {
      const l = await fx.status(n).catch(() => undefined);
      if (l?.leaseID) ids.push(l.leaseID);
    }
    const forbidden = [...names, ...names.map((n) => `${fx.ns}/${n}`), ...ids];
    const uids = (await fx.kubectl(['-n', fx.ns, 'get', 'leases.leasehold.dev', '-o', 'jsonpath={.items[*].metadata.uid}'])).stdout.split(/\s+/).filter(Boolean);
    forbidden.push(...uids, ...uids.map((u) => u.slice(0, 8)));

    const text = await (await fetch(fx.controller.metricsURL)).text();
    const samples = parseExposition(text);

    // ---- every target, every selector ----
    const rows: string[][] = [];
    const missing: string[] = [];
    let targets = 0;
    for (const p of panels) {
      for (const t of p.targets ?? []) {
        targets++;
        const sels = selectorsOf(t.expr);
        expect(sels.length).toBeGreaterThan(0);
        let series = 0;
        const lines = new Set<string>();
        for (const sel of sels) {
          const got = samples.filter((s) => matches(s, sel));
          if (got.length === 0) missing.push(`${p.title} ${t.refId}: ${sel.text}`);
          // A histogram series must have observations, not just empty buckets.
          const hist = /^(.*)_(bucket|sum|count)$/.exec(sel.metric);
          if (hist && samples.some((s) => s.name === `${hist[1]}_bucket`)) {
            const counted = { ...sel, metric: `${hist[1]}_count`, matchers: sel.matchers.filter((m) => m.label !== 'le') };
            const n = samples.filter((s) => matches(s, counted)).reduce((a, s) => a + s.value, 0);
            if (n <= 0) missing.push(`${p.title} ${t.refId}: ${counted.metric} has no observations`);
          }
          series += got.length;
          for (const s of got) lines.add(JSON.stringify(lineLabels(t.expr).map((l) => s.labels[l] ?? '')));
        }
        const v = evaluate(t.expr, samples);
        const value = v ? v.map((x) => `${Object.values(x.labels).join(' ') || '='} ${+x.value.toFixed(3)}`).join(', ') : '';
        rows.push([p.title, t.refId, String(series), String(lines.size), value]);
      }
    }
    const w = rows.reduce((m, r) => Math.max(m, r[0]!.length), 5);
    process.stdout.write(`\n${'panel'.padEnd(w)}  ref  series  lines  instant value (gauge targets)\n` +
      rows.map((r) => `${r[0]!.padEnd(w)}  ${r[1]!.padEnd(3)}  ${r[2]!.padStart(6)}  ${r[3]!.padStart(5)}  ${r[4]}`).join('\n') +
      `\n${panels.length} panels, ${targets} targets, ${samples.length} samples scraped; dash-slow ended ${slowEnd.phase} ${slowEnd.reason ?? ''} ${slowEnd.message ?? ''}\n`);
    expect(missing).toEqual([]);
    // The check can fail: a misspelt metric or a label value nothing has matches no sample.
    for (const bad of ['rate(leasehold_reconcile_totl[1m])', 'sum(leasehold_reconcile_total{result="eror"})']) {
      expect(samples.some((s) => matches(s, selectorsOf(bad)[0]!))).toBe(false);
    }
    expect(panels.length).toBeGreaterThanOrEqual(15);

    // ---- the evaluated gauges agree with the cluster ----
    const panel = (title: string) => panels.find((p) => p.title === title)!.targets![0]!.expr;
    const one = (title: string) => evaluate(panel(title), samples)?.[0]?.value;
    const active = slowEnd.phase === 'Ready' ? 2 : 1; // dash-ready, and dash-slow if it came up
    expect(one('Active leases')).toBe(active);
    expect(one('Spend rate')).toBeCloseTo(1.5 + (slowEnd.phase === 'Ready' ? 0.25 : 0));
    expect(one('Leader replicas')).toBe(1);
    expect(one('Failed leases')).toBeGreaterThanOrEqual(1);
    expect(evaluate(panel('Leases by offer and phase'), samples)).toEqual(expect.arrayContaining([
      // Ready, or Idle: no job ran on it, so its idle countdown (10m) runs.
      { labels: { offer: box, phase: expect.stringMatching(/^(Ready|Idle)$/) }, value: 1 },
      { labels: { offer: bad, phase: 'Failed' }, value: 1 },
    ]));

    // ---- bounded labels ----
    const leaks = samples.flatMap((s) => Object.entries(s.labels)
      .filter(([, v]) => forbidden.some((f) => v === f || v.includes(f)))
      .map(([k, v]) => `${s.name}{${k}="${v}"}`));
    expect(forbidden.length).toBeGreaterThan(names.length * 2);
    expect(leaks).toEqual([]);

    // Ready -> delete -> gone, its machine released.
    const st = await fx.status('dash-ready');
    const del2 = await fx.kubectl(['-n', fx.ns, 'delete', 'leases.leasehold.dev', 'dash-ready', '--timeout=60s']);
    expect(del2.code).toBe(0);
    expect(fx.sshdFor(st.leaseID)).toBe('');
    expect(await fx.controller.metric('leasehold_release_failures_total', { provider: 'command' })).toBeGreaterThanOrEqual(1);
  }, 400_000);
});
