// Whether a machine's measured facts honour its Offer's claim. Counts are
// floors (more CPUs than claimed is fine); os, arch and the GPU count must
// be exact, and the GPU model must contain the claimed model.

export interface Claim {
  os?: string;
  arch?: string;
  cpus?: number;
  memoryGiB?: number;
  gpu?: string;
  gpus?: number;
  vramGiB?: number;
}

export interface Measured {
  os?: string;
  arch?: string;
  cpus?: number;
  memoryGiB?: number;
  gpus?: number;
  gpuModel?: string;
  vramGiB?: number;
}

export function compareFacts(claim: Claim, m: Measured): { ok: true } | { ok: false; differences: string[] } {
  const d: string[] = [];
  if (claim.os && claim.os !== m.os) d.push(`os: offer claims ${claim.os}, machine has ${m.os ?? 'unknown'}`);
  if (claim.arch && claim.arch !== m.arch) d.push(`arch: offer claims ${claim.arch}, machine has ${m.arch ?? 'unknown'}`);
  if (claim.cpus !== undefined && (m.cpus ?? 0) < claim.cpus) d.push(`cpus: offer claims ${claim.cpus}, machine has ${m.cpus ?? 0}`);
  // The kernel keeps some memory for itself: allow 5 %.
  if (claim.memoryGiB !== undefined && (m.memoryGiB ?? 0) < claim.memoryGiB * 0.95) d.push(`memory: offer claims ${claim.memoryGiB} GiB, machine has ${m.memoryGiB ?? 0} GiB`);
  const gpus = claim.gpus ?? (claim.gpu ? 1 : 0);
  if ((m.gpus ?? 0) !== gpus) d.push(`gpus: offer claims ${gpus}, machine has ${m.gpus ?? 0}`);
  if (claim.gpu && !(m.gpuModel ?? '').toLowerCase().includes(claim.gpu.toLowerCase())) d.push(`gpu: offer claims ${claim.gpu}, machine has ${m.gpuModel ?? 'none'}`);
  if (claim.vramGiB !== undefined && gpus > 0 && (m.vramGiB ?? 0) < claim.vramGiB * 0.95) d.push(`vram: offer claims ${claim.vramGiB} GiB per GPU, machine has ${m.vramGiB ?? 0} GiB`);
  return d.length ? { ok: false, differences: d } : { ok: true };
}
