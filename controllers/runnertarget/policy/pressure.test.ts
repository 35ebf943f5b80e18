import { describe, expect, it } from '@jest/globals';
import {
  hostPressure,
  parseCgroupValue,
  parseEvidence,
  parseFlatKeyed,
  parsePressure,
  poolPressure,
  splitHeadOutput,
  tierStep,
  type PressureEvidence,
  type PressureLevel,
} from './pressure.js';
import type { SampleTiming } from './sample.js';
import { NOW, spec } from '../testing/pool.js';

const psi = (some60: number, full = true) =>
  `some avg10=1.00 avg60=${some60.toFixed(2)} avg300=0.50 total=123456\n` + (full ? 'full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' : '');

describe('parsePressure', () => {
  it('reads some and full', () => {
    expect(parsePressure(psi(12.5))).toEqual({
      ok: true,
      value: { some: { avg10: 1, avg60: 12.5, avg300: 0.5, total: 123456 }, full: { avg10: 0, avg60: 0, avg300: 0, total: 0 } },
    });
  });
  it('an older kernel has no full line for cpu', () => expect(parsePressure(psi(3, false))).toMatchObject({ ok: true, value: { full: undefined } }));
  it.each([
    ['', /no "some" line/],
    ['full avg10=0.00 avg60=0.00 avg300=0.00 total=0', /no "some" line/],
    ['some avg10=x avg60=0 avg300=0 total=0', /not a pressure line/],
    ['cat: /proc/pressure/cpu: No such file or directory', /not a pressure line/],
  ])('%j is refused', (text, message) => expect(parsePressure(text)).toMatchObject({ ok: false, message: expect.stringMatching(message) }));
});

describe('cgroup files', () => {
  it.each<[string, object]>([
    ['low 0\nhigh 4\nmax 2\noom 1\noom_kill 1\n', { ok: true }],
    ['oom_kill -1', { ok: false }],
    ['garbage', { ok: false }],
  ])('parseFlatKeyed(%j)', (text, want) => expect(parseFlatKeyed(text)).toMatchObject(want));
  it('parseFlatKeyed keeps the values', () => expect(parseFlatKeyed('oom 1\noom_kill 2').ok && (parseFlatKeyed('oom 1\noom_kill 2') as { value: Map<string, number> }).value.get('oom_kill')).toBe(2));
  it.each<[string, object]>([
    ['8589934592\n', { ok: true, value: 8589934592 }],
    ['max\n', { ok: true, value: 'max' }],
    ['-1', { ok: false }],
    ['', { ok: false }],
  ])('parseCgroupValue(%j)', (text, want) => expect(parseCgroupValue(text)).toEqual(expect.objectContaining(want)));
});

describe('splitHeadOutput and parseEvidence', () => {
  const out = [
    '==> /proc/pressure/cpu <==',
    psi(60),
    '==> /proc/pressure/memory <==',
    psi(0.5),
    '==> /proc/pressure/io <==',
    psi(2),
    '==> memory.current <==',
    '7516192768',
    '',
    '==> memory.max <==',
    '8589934592',
    '',
    '==> memory.events <==',
    'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1',
  ].join('\n');

  it('splits head output into files and reads the evidence', () => {
    const files = splitHeadOutput(out);
    expect([...files.keys()]).toEqual(['/proc/pressure/cpu', '/proc/pressure/memory', '/proc/pressure/io', 'memory.current', 'memory.max', 'memory.events']);
    const e = parseEvidence(files);
    expect(e).toMatchObject({ ok: true, value: { cpu: { some: { avg60: 60 } }, cgroupMemoryUse: 0.875, cgroupOOMKills: 1 } });
  });

  it('a host without PSI says what the kernel needs', () => {
    const files = splitHeadOutput(out);
    files.delete('/proc/pressure/io');
    expect(parseEvidence(files)).toMatchObject({ ok: false, message: expect.stringMatching(/\/proc\/pressure\/io is missing.*CONFIG_PSI/) });
  });

  it('a cgroup without a memory limit gives no use', () => {
    const files = splitHeadOutput(out.replace('8589934592', 'max'));
    const e = parseEvidence(files);
    expect(e.ok && e.value.cgroupMemoryUse).toBeUndefined();
    expect(e.ok && e.value.cgroupOOMKills).toBe(1);
  });
});

const evidence = (cpu: number, memory = 0, io = 0, cgroupMemoryUse?: number): PressureEvidence => {
  const f = (v: number) => (parsePressure(psi(v)) as { value: PressureEvidence['cpu'] }).value;
  return { cpu: f(cpu), memory: f(memory), io: f(io), cgroupMemoryUse };
};

describe('hostPressure', () => {
  it.each<[string, PressureEvidence, PressureLevel]>([
    ['calm', evidence(2), 'low'],
    ['cpu at 50', evidence(50), 'high'],
    ['cpu at 49.99', evidence(49.99), 'normal'],
    ['memory stalls 10%', evidence(0, 10), 'high'],
    ['io stalls 30%', evidence(0, 0, 30), 'high'],
    ['cgroup near its memory limit', evidence(0, 0, 0, 0.95), 'high'],
    ['cgroup at half its memory limit', evidence(0, 0, 0, 0.5), 'normal'],
    ['cpu at 10 is not calm', evidence(10), 'normal'],
    ['an OOM kill in the runner cgroup, all else calm', { ...evidence(2), cgroupOOMKills: 1 }, 'high'],
    ['no OOM kill in the runner cgroup', { ...evidence(2), cgroupOOMKills: 0 }, 'low'],
  ])('%s: %s', (_name, e, level) => expect(hostPressure(e)).toBe(level));
});

describe('poolPressure', () => {
  it.each<[string, PressureEvidence[], PressureLevel | undefined]>([
    ['no busy host', [], undefined],
    ['one busy host under pressure is enough', [evidence(1), evidence(80)], 'high'],
    ['all calm', [evidence(1), evidence(2)], 'low'],
    ['one normal', [evidence(1), evidence(20)], 'normal'],
  ])('%s', (_name, list, level) => expect(poolPressure(list).level).toBe(level));
  it('summarises the highest avg60 of each kind', () => {
    expect(poolPressure([evidence(10, 3, 1), evidence(20, 1, 7)]).summary).toEqual({ cpu: 20, memory: 3, io: 7, hosts: 2 });
  });
});

describe('tierStep', () => {
  const tiers = spec.gce.machineTypeTiers;
  const small = 'n2d-standard-8';
  const large = 'n2d-standard-16';
  it.each<[string, { machineType: string; high: number; low: number } | undefined, PressureLevel | undefined, SampleTiming['kind'], string, number, number, string | undefined]>([
    ['no tier yet: the first', undefined, 'high', 'count', small, 0, 0, undefined],
    ['a tier no longer in spec: the first', { machineType: 'e2-micro', high: 5, low: 0 }, 'high', 'count', small, 0, 0, undefined],
    ['one high sample', { machineType: small, high: 0, low: 0 }, 'high', 'count', small, 1, 0, undefined],
    ['two high samples in a row: up', { machineType: small, high: 1, low: 3 }, 'high', 'count', large, 0, 0, 'up'],
    ['high at the largest tier stays', { machineType: large, high: 1, low: 0 }, 'high', 'count', large, 2, 0, undefined],
    ['a normal sample breaks the streaks', { machineType: small, high: 1, low: 4 }, 'normal', 'count', small, 0, 0, undefined],
    ['five low samples stay', { machineType: large, high: 0, low: 4 }, 'low', 'count', large, 0, 5, undefined],
    ['six low samples: down', { machineType: large, high: 0, low: 5 }, 'low', 'count', small, 0, 0, 'down'],
    ['low at the smallest tier stays', { machineType: small, high: 0, low: 9 }, 'low', 'count', small, 0, 10, undefined],
    ['a restarted series counts this sample only', { machineType: small, high: 1, low: 0 }, 'high', 'restart', small, 1, 0, undefined],
    ['an uncounted sample changes nothing', { machineType: small, high: 1, low: 0 }, 'high', 'early', small, 1, 0, undefined],
    ['waiting changes nothing', { machineType: small, high: 1, low: 0 }, 'high', 'wait', small, 1, 0, undefined],
    ['no busy evidence keeps the streaks', { machineType: small, high: 1, low: 0 }, undefined, 'count', small, 1, 0, undefined],
  ])('%s', (_name, previous, level, timing, machineType, high, low, change) => {
    const s = tierStep(previous, tiers, level, timing, NOW);
    expect(s.tier).toMatchObject({ machineType, high, low });
    expect(s.change).toBe(change);
    if (change) expect(s.tier.changedAt).toBe('2026-12-03T12:00:00Z');
  });

  it('says why it moved', () => {
    expect(tierStep({ machineType: small, high: 1, low: 0 }, tiers, 'high', 'count', NOW).reason).toBe(
      '2 counted samples in a row with high pressure on busy hosts: the pool moves up from n2d-standard-8 to n2d-standard-16',
    );
  });
});
