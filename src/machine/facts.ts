// Whether the facts measured on a machine honour what its Offer claims. Pure.
//
// os, arch and the GPU count must be exactly as claimed (a job built for one
// architecture, or sized for N GPUs, breaks otherwise); CPUs, memory and VRAM
// are floors: more than claimed is fine. The GPU model must contain the
// claimed model, ignoring case ("H100" matches "NVIDIA H100 80GB HBM3").

export interface Claim {
  os?: string | undefined;
  arch?: string | undefined;
  cpus?: number | undefined;
  memoryGiB?: number | undefined;
  /** GPU model; naming one implies 1 GPU unless gpus says otherwise. */
  gpu?: string | undefined;
  gpus?: number | undefined;
  /** Memory of each GPU. */
  vramGiB?: number | undefined;
}

export interface Measured {
  os?: string | undefined;
  arch?: string | undefined;
  cpus?: number | undefined;
  memoryGiB?: number | undefined;
  gpus?: number | undefined;
  gpuModel?: string | undefined;
  /** Memory of the smallest GPU. */
  vramGiB?: number | undefined;
}

export type FactsVerdict = { ok: true } | { ok: false; differences: string[] };

// The kernel keeps part of RAM for itself, so MemTotal reads a few percent
// under what a provider sells.
export const MEMORY_SLACK = 0.05;
// GPU memory is sold in decimal GB ("24 GB" A10: 23028 MiB, 22.5 GiB) and the
// driver reserves some of it, so the floor is looser than for RAM.
export const VRAM_SLACK = 0.1;

export function compareFacts(claim: Claim, measured: Measured): FactsVerdict {
  const differences: string[] = [];
  const differ = (field: string, claimed: string | number, has: string | number) =>
    differences.push(`${field}: offer claims ${claimed}, machine has ${has}`);

  if (claim.os !== undefined && claim.os !== measured.os) differ('os', claim.os, measured.os ?? 'unknown');
  if (claim.arch !== undefined && claim.arch !== measured.arch) differ('arch', claim.arch, measured.arch ?? 'unknown');
  if (claim.cpus !== undefined && (measured.cpus ?? 0) < claim.cpus) differ('cpus', claim.cpus, measured.cpus ?? 0);
  if (claim.memoryGiB !== undefined && (measured.memoryGiB ?? 0) < claim.memoryGiB * (1 - MEMORY_SLACK)) {
    differ('memoryGiB', `${claim.memoryGiB} GiB`, `${measured.memoryGiB ?? 0} GiB`);
  }

  const gpus = claim.gpus ?? (claim.gpu ? 1 : 0);
  const hasGpus = measured.gpus ?? 0;
  if (hasGpus !== gpus) differ('gpus', gpus, hasGpus);
  if (claim.gpu && !(measured.gpuModel ?? '').toLowerCase().includes(claim.gpu.toLowerCase())) {
    differ('gpu', claim.gpu, measured.gpuModel || 'no GPU');
  }
  if (claim.vramGiB !== undefined && gpus > 0 && (measured.vramGiB ?? 0) < claim.vramGiB * (1 - VRAM_SLACK)) {
    differ('vramGiB', `${claim.vramGiB} GiB per GPU`, `${measured.vramGiB ?? 0} GiB`);
  }
  return differences.length ? { ok: false, differences } : { ok: true };
}
