import { describe, it, expect } from '@jest/globals';
import { archOf, buildCandidates, candidateName, dearerWithCapacity, overCap, parseGpuDescription, pickRegion } from './catalog.js';
import type { LambdaInstanceType } from './client.js';

const t = (name: string, cents: number, regions: string[], over: Partial<LambdaInstanceType> = {}): LambdaInstanceType => ({
  name,
  description: name,
  gpuDescription: 'A10 (24 GB PCIe)',
  priceCentsPerHour: cents,
  vcpus: 30,
  memoryGiB: 200,
  storageGiB: 1400,
  gpus: 1,
  regions,
  ...over,
});
const base = { maxPricePerHour: 10, arches: ['amd64', 'arm64'] as const };

describe('Lambda catalog', () => {
  it('names candidates after the type with hyphens', () => {
    expect(candidateName('gpu_1x_h100_sxm5')).toBe('gpu-1x-h100-sxm5');
  });

  it('reads model and VRAM from the GPU description', () => {
    expect(parseGpuDescription('H100 (80 GB SXM5)')).toEqual({ model: 'H100', vramGiB: 80 });
    expect(parseGpuDescription('Tesla V100 (16 GB)')).toEqual({ model: 'Tesla V100', vramGiB: 16 });
    expect(parseGpuDescription('')).toEqual({});
  });

  it('knows Grace Hopper types are arm64 and the rest amd64', () => {
    expect(archOf({ name: 'gpu_1x_gh200', description: '1x GH200 (96 GB)', gpuDescription: 'GH200 (96 GB)' })).toBe('arm64');
    expect(archOf({ name: 'gpu_1x_a10', description: '1x A10', gpuDescription: 'A10 (24 GB PCIe)' })).toBe('amd64');
  });

  it('picks the first wanted region with capacity, any when none is wanted, only the file system region when set', () => {
    expect(pickRegion(['us-west-1', 'us-east-1'], ['us-east-1', 'us-west-1'])).toBe('us-east-1');
    expect(pickRegion(['us-west-1'], ['us-east-1'])).toBeUndefined();
    expect(pickRegion(['us-west-1'], undefined)).toBe('us-west-1');
    expect(pickRegion(['us-west-1', 'us-east-1'], ['us-west-1'], 'us-east-1')).toBe('us-east-1');
  });

  it('caps prices, with 0 meaning no cap, and names the setting to raise', () => {
    expect(overCap(9.99, 10)).toBeUndefined();
    expect(overCap(10, 10)).toBeUndefined();
    expect(overCap(23.92, 10)).toContain('spec.lambda.maxPricePerHour');
    expect(overCap(23.92, 10)).toContain('$23.92/h');
    expect(overCap(1000, 0)).toBeUndefined();
  });

  it('lists every type, cheapest first, with why the unavailable ones cannot be rented', () => {
    const c = buildCandidates(
      [
        t('gpu_8x_h100_sxm5', 2392, ['us-east-1'], { gpus: 8, gpuDescription: 'H100 (80 GB SXM5)' }),
        t('gpu_1x_a10', 75, []),
        t('gpu_1x_a100', 129, ['us-west-1']),
        t('gpu_1x_h100_pcie', 249, ['us-east-1']),
      ],
      { ...base, regions: ['us-east-1'] },
    );
    expect(c.map((x) => x.name)).toEqual(['gpu-1x-a10', 'gpu-1x-a100', 'gpu-1x-h100-pcie', 'gpu-8x-h100-sxm5']);
    expect(c[0]).toMatchObject({ available: false, reason: 'no capacity in us-east-1' });
    expect(c[1]).toMatchObject({ available: false });
    expect(c[1]!.reason).toContain('capacity only in us-west-1');
    expect(c[2]).toMatchObject({ available: true, region: 'us-east-1', pricePerHour: 2.49, gpuModel: 'A10', vramGiB: 24, cpus: 30, arch: 'amd64' });
    expect(c[3]).toMatchObject({ available: false, gpus: 8, gpuModel: 'H100', vramGiB: 80 });
    expect(c[3]!.reason).toContain('above the cap of $10.00/h');
  });

  it('keeps only the instance types asked for', () => {
    const c = buildCandidates([t('gpu_1x_a10', 75, ['us-east-1']), t('gpu_1x_a100', 129, ['us-east-1'])], { ...base, instanceTypes: ['gpu_1x_a100'] });
    expect(c.map((x) => x.instanceType)).toEqual(['gpu_1x_a100']);
  });

  it('lists a type of an architecture the agent cannot serve as unavailable, with the reason', () => {
    const c = buildCandidates([t('gpu_1x_gh200', 149, ['us-east-1'], { gpuDescription: 'GH200 (96 GB)' })], { ...base, arches: ['amd64'] });
    expect(c[0]).toMatchObject({ available: false, arch: 'arm64' });
    expect(c[0]!.reason).toContain('not available for arm64');
  });
});

describe('the dearer type a launch refused for capacity names', () => {
  // The listing as the launch went out: the cheap type it chose has no capacity left in a wanted region.
  const listing = [
    t('gpu_1x_a10', 75, []),
    t('gpu_1x_a100', 1290, ['us-east-1']),
    t('gpu_8x_h100', 2392, ['us-east-1'], { gpus: 8, gpuDescription: 'H100 (80 GB SXM5)' }),
    t('gpu_1x_h100_far', 1500, ['asia-south-1'], { gpuDescription: 'H100 (80 GB PCIe)' }),
    t('gpu_1x_gh200', 1490, ['us-east-1'], { gpuDescription: 'GH200 (96 GB)' }),
  ];
  const settings = { maxPricePerHour: 10, regions: ['us-east-1'] };
  it.each<[string, Partial<typeof settings> & { instanceTypes?: string[] }, string, string | undefined]>([
    ['the cheapest dearer type that serves the Lease and has capacity in a wanted region', {}, 'gpu', 'gpu_1x_a100'],
    ['one the Lease needs: eight GPUs', {}, 'gpus>=8', 'gpu_8x_h100'],
    ['none when the only dearer H100 with capacity is outside the wanted regions', {}, 'gpu=H100,gpus=1', undefined],
    ['none outside spec.lambda.instanceTypes', { instanceTypes: ['gpu_1x_a10', 'gpu_1x_h100_far'] }, 'gpu', undefined],
    ['none under no cap (0): nothing is dearer than the cap', { maxPricePerHour: 0 }, 'gpu', undefined],
    ['none within the cap: a type the cap allows is not named as dearer', { maxPricePerHour: 100 }, 'gpu', undefined],
    ['none for a where that does not parse', {}, 'gpus>=', undefined],
  ])('%s', (_name, over, where, want) => {
    expect(dearerWithCapacity(listing, { ...settings, ...over }, where)?.instanceType).toBe(want);
  });

  it('carries the price and the setting to raise', () => {
    expect(dearerWithCapacity(listing, settings, 'gpus>=8')?.reason).toBe('listed at $23.92/h, above the cap of $10.00/h; raise spec.lambda.maxPricePerHour to rent it');
  });
});
