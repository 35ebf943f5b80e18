// The emulator's default world: Lambda Cloud regions and a handful of
// instance types with list prices close to the public ones. Tests replace any
// of it through the handle (setCatalog, setCapacity, setPrice).

export interface Region {
  name: string;
  description: string;
}

export interface InstanceTypeSpecs {
  vcpus: number;
  memory_gib: number;
  storage_gib: number;
  gpus: number;
}

/** An instance type exactly as GET /instance-types shows it under `instance_type`. */
export interface InstanceType {
  name: string;
  description: string;
  gpu_description: string;
  price_cents_per_hour: number;
  specs: InstanceTypeSpecs;
}

/**
 * Where a type can be launched: a list of region names (no limit on how many
 * instances), or region name -> how many more instances fit there (each launch
 * takes one, each termination gives it back; 0 means none left).
 */
export type Capacity = readonly string[] | Readonly<Record<string, number>>;

export interface CatalogEntry extends InstanceType {
  /** Capacity of this type; none when absent. */
  regions?: Capacity;
}

export const DEFAULT_REGIONS: readonly Region[] = [
  { name: 'us-east-1', description: 'Virginia, USA' },
  { name: 'us-east-3', description: 'Washington DC, USA' },
  { name: 'us-west-1', description: 'California, USA' },
  { name: 'us-west-2', description: 'Arizona, USA' },
  { name: 'us-west-3', description: 'Utah, USA' },
  { name: 'us-south-1', description: 'Texas, USA' },
  { name: 'us-midwest-1', description: 'Illinois, USA' },
  { name: 'europe-central-1', description: 'Germany' },
  { name: 'asia-northeast-1', description: 'Tokyo, Japan' },
  { name: 'me-west-1', description: 'Israel' },
];

const type = (
  name: string,
  description: string,
  gpu: string,
  cents: number,
  specs: InstanceTypeSpecs,
  regions: string[],
): CatalogEntry => ({ name, description, gpu_description: gpu, price_cents_per_hour: cents, specs, regions });

export const DEFAULT_CATALOG: readonly CatalogEntry[] = [
  type('gpu_1x_a10', '1x A10 (24 GB PCIe)', 'A10 (24 GB PCIe)', 75, { vcpus: 30, memory_gib: 200, storage_gib: 1400, gpus: 1 }, ['us-east-1', 'us-west-1']),
  type('gpu_1x_a6000', '1x RTX A6000 (48 GB)', 'RTX A6000 (48 GB)', 80, { vcpus: 14, memory_gib: 100, storage_gib: 512, gpus: 1 }, []),
  type('gpu_1x_a100_sxm4', '1x A100 (40 GB SXM4)', 'A100 (40 GB SXM4)', 129, { vcpus: 30, memory_gib: 200, storage_gib: 512, gpus: 1 }, ['us-east-1', 'us-west-2']),
  type('gpu_1x_gh200', '1x GH200 (96 GB) ARM64', 'GH200 (96 GB)', 149, { vcpus: 64, memory_gib: 432, storage_gib: 4096, gpus: 1 }, ['us-east-3', 'us-west-1']),
  type('gpu_1x_h100_pcie', '1x H100 (80 GB PCIe)', 'H100 (80 GB PCIe)', 249, { vcpus: 26, memory_gib: 200, storage_gib: 1024, gpus: 1 }, ['us-west-3', 'us-south-1']),
  type('gpu_8x_a100_80gb_sxm4', '8x A100 (80 GB SXM4)', 'A100 (80 GB SXM4)', 1432, { vcpus: 240, memory_gib: 1800, storage_gib: 19500, gpus: 8 }, ['us-midwest-1']),
  type('gpu_8x_h100_sxm5', '8x H100 (80 GB SXM5)', 'H100 (80 GB SXM5)', 2392, { vcpus: 208, memory_gib: 1800, storage_gib: 24780, gpus: 8 }, ['us-east-1', 'us-south-1']),
];
