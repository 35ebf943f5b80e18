// What an emulator records of the requests it saw, for tests to read back.
import type { FaultMode } from './faults.js';

export interface RequestRecord<Op extends string> {
  /** ms since the epoch, when the request arrived. */
  time: number;
  method: string;
  /** Path without the query string. */
  path: string;
  op: Op | 'unknown';
  /** 0 when no answer was sent (drop, hang) or none yet. */
  status: number;
  /** The account the credential belongs to (never the credential); undefined when it was missing or wrong. */
  account: string | undefined;
  fault?: FaultMode;
}

/** A list that keeps only its newest `cap` entries, so that a long run does not grow without bound. */
export class RecordLog<T> {
  private readonly entries: T[] = [];

  constructor(private readonly cap = 20_000) {}

  /** Appends and returns the entry, which the caller may still fill in. */
  push(entry: T): T {
    this.entries.push(entry);
    if (this.entries.length > this.cap) this.entries.splice(0, this.entries.length - this.cap);
    return entry;
  }

  get items(): readonly T[] {
    return this.entries;
  }
}
