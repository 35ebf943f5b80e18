import { describe, it, expect } from '@jest/globals';
import { ANY_REFUSED, WHERE_PATTERN, formatWhere, matchShape, parseWhere, type MachineShape, type ParsedWhere } from './where.js';

const pattern = new RegExp(WHERE_PATTERN);

function ok(raw: string): ParsedWhere {
  const r = parseWhere(raw);
  if (!r.ok) throw new Error(`expected ${raw} to parse: ${r.error}`);
  return r.value;
}

describe('parseWhere: valid', () => {
  const table: Array<[string, ParsedWhere]> = [
    ['gpu', { gpus: 1 }],
    ['gpu=h100', { gpuModel: 'h100', gpus: 1 }],
    ['gpu=H100', { gpuModel: 'H100', gpus: 1 }],
    ['gpus>=8', { gpus: 8 }],
    ['gpu=a100,gpus>=8', { gpuModel: 'a100', gpus: 8 }],
    ['gpus>=8,gpu=a100', { gpuModel: 'a100', gpus: 8 }],
    ['cpus>=16', { cpus: 16 }],
    ['vram>=80', { vramGiB: 80, gpus: 1 }],
    ['arch=arm64', { arch: 'arm64' }],
    ['os=darwin', { os: 'darwin' }],
    ['tool=docker', { tools: ['docker'] }],
    ['tool=python3,tool=docker,tool=docker', { tools: ['docker', 'python3'] }],
    [
      'gpu=h100,cpus>=26,vram>=80,arch=amd64,os=linux,tool=nvidia-smi',
      { gpuModel: 'h100', gpus: 1, cpus: 26, vramGiB: 80, arch: 'amd64', os: 'linux', tools: ['nvidia-smi'] },
    ],
    ['gpu=rtx_6000.ada+', { gpuModel: 'rtx_6000.ada+', gpus: 1 }],
  ];
  it.each(table)('%s', (raw, want) => {
    expect(parseWhere(raw)).toEqual({ ok: true, value: want });
    expect(pattern.test(raw)).toBe(true);
  });

  it('accepts "*" only when asked to', () => {
    expect(parseWhere('*', { allowAny: true })).toEqual({ ok: true, value: { any: true } });
    expect(pattern.test('*')).toBe(true);
  });

  it('round-trips through formatWhere', () => {
    for (const raw of ['gpu', 'gpu=h100', 'gpu=a100,gpus>=8', 'cpus>=4,arch=arm64,tool=docker', 'vram>=24']) {
      const again = parseWhere(formatWhere(ok(raw)));
      expect(again).toEqual({ ok: true, value: ok(raw) });
    }
  });
});

describe('parseWhere: refused', () => {
  const table: Array<[string, RegExp]> = [
    ['*', /a Lease must name what it needs/],
    ['', /empty/],
    ['gpu, cpus>=8', /whitespace.*bare commas/],
    ['gpu,,cpus>=8', /empty term at position 2.*extra comma/],
    ['gpu,', /empty term/],
    ['*,gpu', /"\*" cannot be combined/],
    ['gpus>=0', /term "gpus>=0".*whole number from 1/],
    ['gpus>=08', /term "gpus>=08".*without leading zeros/],
    ['cpus>=many', /term "cpus>=many".*CPUs.*whole number/],
    ['vram>=1.5', /term "vram>=1.5".*GiB/],
    ['gpus=4', /unknown term "gpus=4".*did you mean "gpus>=N"/],
    ['cpu>=4', /unknown term "cpu>=4".*did you mean "cpus>=N"/],
    ['memory>=32', /unknown term "memory>=32"/],
    ['arch=x86_64', /term "arch=x86_64": arch must be one of amd64, arm64/],
    ['os=freebsd', /term "os=freebsd": os must be one of linux, darwin, windows/],
    ['gpu=', /term "gpu=".*GPU model/],
    ['gpu=h 100', /whitespace/],
    ['gpu=h100!', /term "gpu=h100!".*GPU model/],
    ['tool=', /term "tool=".*tool name/],
    ['gpu=h100,gpu=a100', /term "gpu=a100" repeats "gpu=h100": give gpu once/],
    ['gpu,gpu=h100', /repeats "gpu"/],
    ['cpus>=2,cpus>=4', /give cpus once/],
    ['arch=amd64,arch=arm64', /give arch once/],
    ['GPU', /unknown term "GPU"/],
    ['gpu=' + 'a'.repeat(65), /at most 64/],
    ['tool=x,'.repeat(40) + 'gpu', /characters long; keep it to 256/],
  ];
  it.each(table)('%j', (raw, message) => {
    const r = parseWhere(raw);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(message);
  });

  it('says why "*" is refused', () => {
    expect(parseWhere('*')).toEqual({ ok: false, error: ANY_REFUSED });
  });

  it('WHERE_PATTERN refuses what the parser refuses for its syntax', () => {
    for (const raw of [
      '',
      'gpu, cpus>=8',
      'gpu,,cpus>=8',
      'gpu,',
      '*,gpu',
      'gpus>=0',
      'gpus>=08',
      'vram>=1.5',
      'gpus=4',
      'arch=x86_64',
      'os=freebsd',
      'gpu=',
      'tool=',
      'GPU',
      'gpu=h100!',
      'gpu\n',
    ]) {
      expect({ raw, matches: pattern.test(raw) }).toEqual({ raw, matches: false });
    }
  });
});

describe('matchShape', () => {
  const h100: MachineShape = { os: 'linux', arch: 'amd64', cpus: 26, gpu: 'H100 80GB', vramGiB: 80, tools: ['docker'] };
  const a10: MachineShape = { os: 'linux', arch: 'amd64', cpus: 30, gpu: 'NVIDIA A10', gpus: 1, vramGiB: 24 };
  const cpuBox: MachineShape = { os: 'linux', arch: 'arm64', cpus: 8 };
  const eight: MachineShape = { os: 'linux', arch: 'amd64', cpus: 208, gpu: 'H100 SXM5', gpus: 8, vramGiB: 80 };

  const table: Array<[string, MachineShape, string[] | 'ok']> = [
    ['gpu', h100, 'ok'],
    ['gpu=h100', h100, 'ok'],
    ['gpu=H100', h100, 'ok'],
    ['gpu=80gb', h100, 'ok'],
    ['gpu=h100', cpuBox, ['requires 1 GPU matching h100 (has none)']],
    ['gpu=h100', a10, ['requires 1 GPU matching h100 (has 1x NVIDIA A10)']],
    ['gpu=h100,gpus>=8', h100, ['requires 8 GPUs matching h100 (has 1x H100 80GB)']],
    ['gpu=h100,gpus>=8', eight, 'ok'],
    ['gpus>=8', eight, 'ok'],
    ['gpus>=2', a10, ['requires 2 GPUs (has 1)']],
    ['gpu', cpuBox, ['requires 1 GPU (has none)']],
    ['cpus>=16', cpuBox, ['requires 16 CPUs (has 8)']],
    ['cpus>=1', { os: 'linux', arch: 'amd64' }, ['requires 1 CPU (CPU count unknown)']],
    ['vram>=40', a10, ['requires 40 GiB of VRAM per GPU (has 24 GiB)']],
    ['vram>=40', h100, 'ok'],
    ['vram>=40', { os: 'linux', arch: 'amd64', gpu: 'T4' }, ['requires 40 GiB of VRAM per GPU (VRAM unknown)']],
    ['vram>=40', cpuBox, ['requires 1 GPU (has none)']],
    ['arch=arm64', h100, ['requires arch arm64 (is amd64)']],
    ['os=darwin', h100, ['requires os darwin (is linux)']],
    ['tool=docker', h100, 'ok'],
    ['tool=docker,tool=python3', h100, ['requires tool python3 (not declared)']],
    [
      'gpu=h100,cpus>=16,arch=amd64,tool=docker',
      cpuBox,
      [
        'requires 1 GPU matching h100 (has none)',
        'requires 16 CPUs (has 8)',
        'requires arch amd64 (is arm64)',
        'requires tool docker (not declared)',
      ],
    ],
  ];
  it.each(table)('%s against %j', (raw, shape, want) => {
    const got = matchShape(ok(raw), shape);
    expect(got).toEqual(want === 'ok' ? { ok: true } : { ok: false, lacks: want });
  });

  it('treats a model with gpus unset as one GPU and gpus 0 as none', () => {
    expect(matchShape(ok('gpu'), { os: 'linux', arch: 'amd64', gpu: 'A10' })).toEqual({ ok: true });
    expect(matchShape(ok('gpu'), { os: 'linux', arch: 'amd64', gpu: 'A10', gpus: 0 })).toEqual({
      ok: false,
      lacks: ['requires 1 GPU (has none)'],
    });
  });

  it('names GPUs of unknown model', () => {
    expect(matchShape(ok('gpu=h100'), { os: 'linux', arch: 'amd64', gpus: 2 })).toEqual({
      ok: false,
      lacks: ['requires 1 GPU matching h100 (has 2 GPUs of unknown model)'],
    });
  });

  it('lets "*" match anything', () => {
    const any = parseWhere('*', { allowAny: true });
    expect(any.ok && matchShape(any.value, cpuBox)).toEqual({ ok: true });
  });
});
