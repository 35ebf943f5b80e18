// Fault injection: faults armed per operation (or for any), hit at a rate, a
// number of times, for one credential. The REST pipeline (api.ts) acts them out.
import { sameSecret } from './http.js';

export type FaultMode = 'drop' | 'status' | 'delay' | 'hang' | 'stall';

/** The operation that matches every request, named routes or not. */
export const ANY_OP = 'any';

export interface FaultSpec<Op extends string> {
  /** The operation of the routes it hits, or 'any'. */
  op: Op | typeof ANY_OP;
  /**
   * drop: do the work, then destroy the socket without an answer;
   * status: answer `status` in the API's error shape without doing the work;
   * delay: read the request, wait `ms`, then handle it normally (also when the client has gone meanwhile);
   * hang: never answer (the socket stays open until the client gives up or the server closes);
   * stall: do the work, then never answer (a change made whose answer the caller is still waiting for).
   */
  mode: FaultMode;
  /** For mode status: the HTTP status (default 500). */
  status?: number;
  /** For mode status: the error code (default: the API's code for the status). */
  code?: string;
  message?: string;
  /** For mode delay: milliseconds (default 1000). */
  ms?: number;
  /** How many matching requests it hits; then it is gone. Unlimited when absent. */
  times?: number;
  /** Chance 0..1 that a matching request is hit (default 1); a miss does not use up `times`. */
  rate?: number;
  /** Only requests made with this credential (default: any credential, or none). */
  apiKey?: string;
}

export interface Fault<Op extends string> extends FaultSpec<Op> {
  id: string;
  /** Requests it has hit so far. */
  hits: number;
}

export class FaultInjector<Op extends string> {
  private readonly armed: Fault<Op>[] = [];
  private seq = 0;

  /** `random` decides hits of faults with a rate; pass seededRandom(n) for a repeatable run. */
  constructor(private readonly random: () => number = Math.random) {}

  /** Arms a fault; returns its ID. */
  add(spec: FaultSpec<Op>): string {
    const id = `fault-${++this.seq}`;
    this.armed.push({ ...spec, id, hits: 0 });
    return id;
  }

  clear(): void {
    this.armed.length = 0;
  }

  /** Copies of the armed faults, in the order they are tried. */
  get list(): Fault<Op>[] {
    return this.armed.map((f) => ({ ...f }));
  }

  /** The first armed fault that hits a request for `op` made with `credential`; counts the hit. */
  pick(op: Op | 'unknown', credential: string | undefined): Fault<Op> | undefined {
    for (const f of this.armed) {
      if (f.op !== ANY_OP && f.op !== op) continue;
      if (f.apiKey !== undefined && (credential === undefined || !sameSecret(f.apiKey, credential))) continue;
      if (f.rate !== undefined && this.random() >= f.rate) continue;
      f.hits++;
      if (f.times !== undefined && f.hits >= f.times) this.armed.splice(this.armed.indexOf(f), 1);
      return f;
    }
    return undefined;
  }
}

/** A repeatable random source in [0, 1) (mulberry32). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
