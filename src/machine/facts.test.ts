import { describe, it, expect } from '@jest/globals';
import { compareFacts, type Claim, type Measured } from './facts.js';

const h100: Measured = { os: 'linux', arch: 'amd64', cpus: 26, memoryGiB: 221, gpus: 1, gpuModel: 'NVIDIA H100 80GB HBM3', vramGiB: 80 };
const cpuOnly: Measured = { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 8, gpus: 0 };

describe('compareFacts', () => {
  it.each<[string, Claim, Measured]>([
    ['an exact match', { os: 'linux', arch: 'amd64', cpus: 26, memoryGiB: 221, gpu: 'H100', vramGiB: 80 }, h100],
    ['more CPUs and memory than claimed', { os: 'linux', arch: 'amd64', cpus: 2, memoryGiB: 4 }, { ...cpuOnly, cpus: 16, memoryGiB: 64 }],
    ['memory a little under the claim (the kernel keeps some)', { os: 'linux', arch: 'amd64', memoryGiB: 8 }, { ...cpuOnly, memoryGiB: 7.6 }],
    ['the model matched ignoring case, as a substring', { os: 'linux', arch: 'amd64', gpu: 'h100 80gb' }, h100],
    ['a 24 GB card that reads 22 GiB', { os: 'linux', arch: 'amd64', gpu: 'A10', vramGiB: 24 }, { ...cpuOnly, gpus: 1, gpuModel: 'NVIDIA A10', vramGiB: 22 }],
    ['several GPUs claimed and present', { os: 'linux', arch: 'amd64', gpu: 'H100', gpus: 8 }, { ...h100, gpus: 8 }],
    ['no claim beyond os and arch', { os: 'linux', arch: 'amd64' }, cpuOnly],
    ['nothing claimed at all', {}, cpuOnly],
  ])('accepts %s', (_name, claim, measured) => {
    expect(compareFacts(claim, measured)).toEqual({ ok: true });
  });

  it.each<[string, Claim, Measured, string[]]>([
    ['fewer CPUs', { os: 'linux', arch: 'amd64', cpus: 26 }, cpuOnly, ['cpus: offer claims 26, machine has 2']],
    ['another os', { os: 'darwin', arch: 'amd64' }, cpuOnly, ['os: offer claims darwin, machine has linux']],
    ['another arch', { os: 'linux', arch: 'arm64' }, cpuOnly, ['arch: offer claims arm64, machine has amd64']],
    ['memory well under the claim', { os: 'linux', arch: 'amd64', memoryGiB: 16 }, cpuOnly, ['memoryGiB: offer claims 16 GiB, machine has 8 GiB']],
    ['no GPU where one is named', { os: 'linux', arch: 'amd64', gpu: 'H100' }, cpuOnly, ['gpus: offer claims 1, machine has 0', 'gpu: offer claims H100, machine has no GPU']],
    ['another GPU model', { os: 'linux', arch: 'amd64', gpu: 'A100' }, h100, ['gpu: offer claims A100, machine has NVIDIA H100 80GB HBM3']],
    ['fewer GPUs', { os: 'linux', arch: 'amd64', gpu: 'H100', gpus: 8 }, h100, ['gpus: offer claims 8, machine has 1']],
    ['more GPUs than claimed', { os: 'linux', arch: 'amd64', gpu: 'H100' }, { ...h100, gpus: 2 }, ['gpus: offer claims 1, machine has 2']],
    ['a GPU where none is claimed', { os: 'linux', arch: 'amd64' }, h100, ['gpus: offer claims 0, machine has 1']],
    ['less VRAM', { os: 'linux', arch: 'amd64', gpu: 'H100', vramGiB: 94 }, h100, ['vramGiB: offer claims 94 GiB per GPU, machine has 80 GiB']],
    ['nothing measured', { os: 'linux', arch: 'amd64', cpus: 1 }, {}, ['os: offer claims linux, machine has unknown', 'arch: offer claims amd64, machine has unknown', 'cpus: offer claims 1, machine has 0']],
  ])('refuses %s, naming each fact that differs', (_name, claim, measured, differences) => {
    expect(compareFacts(claim, measured)).toEqual({ ok: false, differences });
  });

  it('reports every difference at once', () => {
    const got = compareFacts({ os: 'linux', arch: 'arm64', cpus: 26, memoryGiB: 200, gpu: 'H100', vramGiB: 80 }, cpuOnly);
    expect(got.ok).toBe(false);
    expect(!got.ok && got.differences.map((d) => d.split(':')[0])).toEqual(['arch', 'cpus', 'memoryGiB', 'gpus', 'gpu', 'vramGiB']);
  });
});
