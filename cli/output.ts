// What the CLI prints: aligned tables for people, progress on stderr (a
// spinner only when stderr is a terminal; one line per change otherwise, so
// logs of scripts stay readable).

/** Columns padded to their widest cell, two spaces apart; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n') + '\n';
}

export function price(usd: number | undefined): string {
  return usd === undefined ? '-' : `$${usd.toFixed(2)}`;
}

/** "3m20s", "2h5m", "45s": a duration for people, to the second below an hour. */
export function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  const h = Math.floor(m / 60);
  return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
}

export interface ProgressSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Progress lines, "leasehold: ..." on stderr. On a terminal the latest line
 * carries a spinner and is rewritten in place; elsewhere each distinct line
 * is printed once.
 */
export class Progress {
  #last: string | undefined;
  #frame = 0;
  #timer: NodeJS.Timeout | undefined;
  #shown = false;

  constructor(private readonly out: ProgressSink) {}

  /** Shows `line` unless it is the one shown last. */
  step(line: string): void {
    if (line === this.#last) return;
    this.#last = line;
    if (!this.out.isTTY) {
      this.out.write(`leasehold: ${line}\n`);
      return;
    }
    this.#draw();
    if (!this.#timer) {
      this.#timer = setInterval(() => this.#draw(), 100);
      this.#timer.unref();
    }
  }

  /** A line kept on screen (on a terminal, the spinner line is replaced by it). */
  note(line: string): void {
    this.done();
    this.#last = line;
    this.out.write(`leasehold: ${line}\n`);
  }

  /** Stops the spinner and clears its line; call before anything else writes to the terminal. */
  done(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#clear();
  }

  #draw(): void {
    this.#frame = (this.#frame + 1) % FRAMES.length;
    this.out.write(`\r\x1b[2K${FRAMES[this.#frame]} leasehold: ${this.#last ?? ''}`);
    this.#shown = true;
  }

  #clear(): void {
    if (this.out.isTTY && this.#shown) this.out.write('\r\x1b[2K');
    this.#shown = false;
  }
}
