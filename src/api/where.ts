// The `where` requirement syntax: what a Lease needs from a machine.
//
//   gpu              at least one GPU, any model
//   gpu=MODEL        GPUs whose model name contains MODEL (case-insensitive)
//   gpus>=N          at least N GPUs
//   cpus>=N          at least N CPUs
//   vram>=GiB        at least that much memory on each GPU
//   arch=amd64|arm64
//   os=linux|darwin|windows
//   tool=NAME        the machine declares NAME among its tools (repeatable)
//   *                any runner, never a lease (refused for a Lease)
//
// Terms are joined by commas with no spaces. The regular expression in
// WHERE_PATTERN accepts exactly the strings parseWhere can accept (apart from
// a term given twice, which only the parser and a CEL rule catch), so the API
// server refuses garbage at admission and the controller never sees it.

export const ARCHES = ['amd64', 'arm64'] as const;
export const OSES = ['linux', 'darwin', 'windows'] as const;
export type Arch = (typeof ARCHES)[number];
export type OS = (typeof OSES)[number];

/** Longest `where` string accepted, in characters. */
export const WHERE_MAX_LENGTH = 256;

const NAME = '[A-Za-z0-9][A-Za-z0-9._+-]{0,63}';
const COUNT = '[1-9][0-9]{0,5}';
const TERM =
  `(gpu(=${NAME})?|gpus>=${COUNT}|cpus>=${COUNT}|vram>=${COUNT}` +
  `|arch=(${ARCHES.join('|')})|os=(${OSES.join('|')})|tool=${NAME})`;

/**
 * A regular expression (as a string, anchored) that accepts exactly the
 * `where` syntax. It is valid both in ECMAScript and in Go's RE2, so it can be
 * an OpenAPI `pattern` in a CRD.
 */
export const WHERE_PATTERN = `^(\\*|${TERM}(,${TERM})*)$`;

const NAME_RE = new RegExp(`^${NAME}$`);
const COUNT_RE = new RegExp(`^${COUNT}$`);

/** The structured form of a `where` string. */
export interface ParsedWhere {
  /** `*`: any runner. Never valid for a Lease. */
  any?: boolean;
  /** Substring the GPU model must contain, compared case-insensitively. */
  gpuModel?: string;
  /** Minimum number of GPUs; 1 when only `gpu` or `gpu=MODEL` is given. */
  gpus?: number;
  /** Minimum number of CPUs. */
  cpus?: number;
  /** Minimum memory per GPU, in GiB. */
  vramGiB?: number;
  arch?: Arch;
  os?: OS;
  /** Tools the machine must declare, sorted, without duplicates. */
  tools?: string[];
}

export type ParseResult = { ok: true; value: ParsedWhere } | { ok: false; error: string };

export interface ParseWhereOptions {
  /**
   * Accept `*` (any runner). Off by default, because every caller in
   * Leasehold parses the `where` of a Lease, and a Lease must name what it
   * needs.
   */
  allowAny?: boolean;
}

/** The message given when a Lease says `where: "*"`. */
export const ANY_REFUSED =
  'where "*" means any runner and never leases a machine; a Lease must name what it needs, e.g. "gpu", "gpu=h100" or "cpus>=8"';

const SYNTAX_HINT =
  'terms are gpu, gpu=MODEL, gpus>=N, cpus>=N, vram>=GiB, arch=amd64|arm64, os=linux|darwin|windows, tool=NAME, joined by commas';

function fail(error: string): ParseResult {
  return { ok: false, error };
}

/** Parses a `where` string. Errors name the offending term and how to fix it. */
export function parseWhere(raw: string, opts: ParseWhereOptions = {}): ParseResult {
  if (typeof raw !== 'string') return fail(`where must be a string (${SYNTAX_HINT})`);
  if (raw.length === 0) return fail(`where is empty: name what the machine needs (${SYNTAX_HINT})`);
  if (raw.length > WHERE_MAX_LENGTH) {
    return fail(`where is ${raw.length} characters long; keep it to ${WHERE_MAX_LENGTH}`);
  }
  if (raw === '*') return opts.allowAny ? { ok: true, value: { any: true } } : fail(ANY_REFUSED);
  if (/\s/.test(raw)) {
    return fail(`where ${JSON.stringify(raw)} contains whitespace: join terms with bare commas, e.g. "gpu=h100,cpus>=8"`);
  }

  const value: ParsedWhere = {};
  const tools = new Set<string>();
  let gpuTerm: string | undefined;
  const seen = new Map<string, string>();

  const once = (key: string, term: string): string | undefined => {
    const prev = seen.get(key);
    if (prev !== undefined) {
      return `term "${term}" repeats "${prev}": give ${key} once`;
    }
    seen.set(key, term);
    return undefined;
  };

  const terms = raw.split(',');
  for (const [i, term] of terms.entries()) {
    if (term === '') {
      return fail(`where ${JSON.stringify(raw)} has an empty term at position ${i + 1}: remove the extra comma`);
    }
    if (term === '*') {
      return fail('term "*" cannot be combined with other terms: "*" stands alone and is refused for a Lease');
    }

    const count = (key: string, what: string, rest: string): number | string => {
      if (!COUNT_RE.test(rest)) {
        return `term "${term}": ${what} must be a whole number from 1 to 999999 without leading zeros, e.g. "${key}>=8"`;
      }
      return Number(rest);
    };

    let m: RegExpMatchArray | null;
    if (term === 'gpu' || term.startsWith('gpu=')) {
      const dup = once('gpu', term);
      if (dup) return fail(dup);
      gpuTerm = term;
      if (term !== 'gpu') {
        const model = term.slice(4);
        if (!NAME_RE.test(model)) {
          return fail(
            `term "${term}": the GPU model must be letters, digits, ".", "_", "+" or "-" (at most 64), e.g. "gpu=h100"`,
          );
        }
        value.gpuModel = model;
      }
    } else if ((m = /^(gpus|cpus|vram)>=(.*)$/.exec(term))) {
      const key = m[1] as 'gpus' | 'cpus' | 'vram';
      const dup = once(key, term);
      if (dup) return fail(dup);
      const what = key === 'vram' ? 'the GiB of memory per GPU' : `the number of ${key === 'gpus' ? 'GPUs' : 'CPUs'}`;
      const n = count(key, what, m[2] ?? '');
      if (typeof n === 'string') return fail(n);
      if (key === 'gpus') value.gpus = n;
      else if (key === 'cpus') value.cpus = n;
      else value.vramGiB = n;
    } else if ((m = /^(arch|os)=(.*)$/.exec(term))) {
      const key = m[1] as 'arch' | 'os';
      const dup = once(key, term);
      if (dup) return fail(dup);
      const v = m[2] ?? '';
      if (key === 'arch') {
        if (!(ARCHES as readonly string[]).includes(v)) {
          return fail(`term "${term}": arch must be one of ${ARCHES.join(', ')}`);
        }
        value.arch = v as Arch;
      } else {
        if (!(OSES as readonly string[]).includes(v)) {
          return fail(`term "${term}": os must be one of ${OSES.join(', ')}`);
        }
        value.os = v as OS;
      }
    } else if (term.startsWith('tool=')) {
      const name = term.slice(5);
      if (!NAME_RE.test(name)) {
        return fail(
          `term "${term}": a tool name must be letters, digits, ".", "_", "+" or "-" (at most 64), e.g. "tool=docker"`,
        );
      }
      tools.add(name);
    } else {
      const near = /^(gpus?|cpus?|vram|arch|os|tool)\b/.exec(term);
      const hint = near ? `; did you mean ${suggest(near[1] ?? '')}?` : '';
      return fail(`unknown term "${term}"${hint} (${SYNTAX_HINT})`);
    }
  }

  // A named GPU, or bare `gpu`, asks for at least one.
  if (gpuTerm !== undefined && value.gpus === undefined) value.gpus = 1;
  if (value.vramGiB !== undefined && value.gpus === undefined) {
    // vram is per GPU: it implies a GPU.
    value.gpus = 1;
  }
  if (tools.size > 0) value.tools = [...tools].sort();
  return { ok: true, value };
}

function suggest(key: string): string {
  switch (key) {
    case 'gpu':
      return '"gpu" or "gpu=MODEL"';
    case 'gpus':
      return '"gpus>=N"';
    case 'cpu':
    case 'cpus':
      return '"cpus>=N"';
    case 'vram':
      return '"vram>=GiB"';
    case 'arch':
      return `"arch=${ARCHES.join('|')}"`;
    case 'os':
      return `"os=${OSES.join('|')}"`;
    default:
      return '"tool=NAME"';
  }
}

/** Writes a parsed `where` back in its canonical string form. */
export function formatWhere(w: ParsedWhere): string {
  if (w.any) return '*';
  const terms: string[] = [];
  if (w.gpuModel !== undefined) terms.push(`gpu=${w.gpuModel}`);
  if (w.gpus !== undefined && !(w.gpus === 1 && w.gpuModel !== undefined)) {
    terms.push(w.gpus === 1 && w.gpuModel === undefined ? 'gpu' : `gpus>=${w.gpus}`);
  }
  if (w.cpus !== undefined) terms.push(`cpus>=${w.cpus}`);
  if (w.vramGiB !== undefined) terms.push(`vram>=${w.vramGiB}`);
  if (w.arch !== undefined) terms.push(`arch=${w.arch}`);
  if (w.os !== undefined) terms.push(`os=${w.os}`);
  for (const t of w.tools ?? []) terms.push(`tool=${t}`);
  return terms.join(',');
}

/** What a machine has, or what an Offer claims it has. */
export interface MachineShape {
  os: OS | string;
  arch: Arch | string;
  cpus?: number;
  /** GPU model, e.g. "H100 80GB". */
  gpu?: string;
  /** Number of GPUs; taken as 1 when `gpu` is set and this is not. */
  gpus?: number;
  /** Memory per GPU, in GiB. */
  vramGiB?: number;
  tools?: string[];
}

export type MatchResult = { ok: true } | { ok: false; lacks: string[] };

/** The number of GPUs a shape has, with the "1 when a model is named" default. */
export function shapeGpus(shape: Pick<MachineShape, 'gpu' | 'gpus'>): number {
  if (shape.gpus !== undefined) return shape.gpus;
  return shape.gpu ? 1 : 0;
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * Checks a shape against a parsed `where`. Pure. Every unmet requirement
 * becomes one phrase in `lacks`, e.g. "requires 1 GPU matching h100 (has none)".
 */
export function matchShape(where: ParsedWhere, shape: MachineShape): MatchResult {
  if (where.any) return { ok: true };
  const lacks: string[] = [];
  const has = shapeGpus(shape);
  const model = shape.gpu?.trim() ? shape.gpu.trim() : undefined;
  const hasText =
    has === 0 ? 'has none' : model ? `has ${has}x ${model}` : `has ${plural(has, 'GPU', 'GPUs')} of unknown model`;

  const needGpus = where.gpus ?? (where.gpuModel !== undefined ? 1 : undefined);
  if (where.gpuModel !== undefined) {
    const want = where.gpuModel.toLowerCase();
    const modelOk = model !== undefined && model.toLowerCase().includes(want);
    if (!modelOk || has < (needGpus ?? 1)) {
      lacks.push(`requires ${plural(needGpus ?? 1, 'GPU', 'GPUs')} matching ${where.gpuModel} (${hasText})`);
    }
  } else if (needGpus !== undefined && has < needGpus) {
    lacks.push(`requires ${plural(needGpus, 'GPU', 'GPUs')} (${has === 0 ? 'has none' : `has ${has}`})`);
  }

  if (where.vramGiB !== undefined) {
    // With no GPU at all, the GPU count above already says what is missing.
    if (has === 0) {
      // nothing more to add
    } else if (shape.vramGiB === undefined) {
      lacks.push(`requires ${where.vramGiB} GiB of VRAM per GPU (VRAM unknown)`);
    } else if (shape.vramGiB < where.vramGiB) {
      lacks.push(`requires ${where.vramGiB} GiB of VRAM per GPU (has ${shape.vramGiB} GiB)`);
    }
  }

  if (where.cpus !== undefined) {
    if (shape.cpus === undefined) {
      lacks.push(`requires ${plural(where.cpus, 'CPU', 'CPUs')} (CPU count unknown)`);
    } else if (shape.cpus < where.cpus) {
      lacks.push(`requires ${plural(where.cpus, 'CPU', 'CPUs')} (has ${shape.cpus})`);
    }
  }

  if (where.arch !== undefined && shape.arch !== where.arch) {
    lacks.push(`requires arch ${where.arch} (is ${shape.arch})`);
  }
  if (where.os !== undefined && shape.os !== where.os) {
    lacks.push(`requires os ${where.os} (is ${shape.os})`);
  }

  const declared = new Set(shape.tools ?? []);
  for (const tool of where.tools ?? []) {
    if (!declared.has(tool)) lacks.push(`requires tool ${tool} (not declared)`);
  }

  return lacks.length === 0 ? { ok: true } : { ok: false, lacks };
}
