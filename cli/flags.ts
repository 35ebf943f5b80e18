// Command-line parsing shared by every command: the flags every command
// takes (which cluster, which namespace, which device key), the split at
// "--", and a bad flag turned into a UsageError that names it (exit 2).
import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface CommonFlags {
  kubeconfig: string | undefined;
  context: string | undefined;
  namespace: string | undefined;
  /** The device key file; undefined: the default under $XDG_CONFIG_HOME. */
  key: string | undefined;
}

type Options = NonNullable<ParseArgsConfig['options']>;

export const COMMON_OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  key: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Options;

export interface Parsed<V> {
  values: V;
  positionals: string[];
  /** Everything after the first "--", as given. */
  rest: string[] | undefined;
}

/**
 * Parses `args` with the common options and `options`. Unknown flags, a
 * missing value or a flag given a value it does not take throw UsageError
 * naming the flag and `usage`.
 */
export function parseCommand<O extends Options>(args: string[], options: O, usage: string): Parsed<ReturnType<typeof parseArgs<{ options: O & typeof COMMON_OPTIONS; allowPositionals: true; strict: true }>>['values']> {
  const dash = args.indexOf('--');
  const own = dash < 0 ? args : args.slice(0, dash);
  const rest = dash < 0 ? undefined : args.slice(dash + 1);
  try {
    const { values, positionals } = parseArgs({ args: own, options: { ...COMMON_OPTIONS, ...options }, allowPositionals: true, strict: true });
    return { values: values as never, positionals, rest };
  } catch (err) {
    throw new UsageError(`${flagMessage(err)}\n${usage}`);
  }
}

/** parseArgs's error, shortened to what was wrong and with which flag. */
function flagMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const unknown = /Unknown option '([^']+)'/.exec(text);
  if (unknown) return `unknown flag ${unknown[1]}`;
  const missing = /Option '([^']+)' argument missing/.exec(text);
  if (missing) return `flag ${missing[1]!.split(',').pop()!.trim().split(' ')[0]} needs a value`;
  const noValue = /Option '([^']+)' does not take an argument/.exec(text);
  if (noValue) return `flag ${noValue[1]} takes no value`;
  const ambiguous = /Option '([^']+)' argument is ambiguous/.exec(text);
  if (ambiguous) return `flag ${ambiguous[1]} needs a value, but the next word is a flag`;
  return text.split('\n')[0]!;
}

export function commonFlags(values: { kubeconfig?: string | undefined; context?: string | undefined; namespace?: string | undefined; key?: string | undefined }): CommonFlags {
  return { kubeconfig: values.kubeconfig, context: values.context, namespace: values.namespace, key: values.key };
}

/** Exactly `n` positional arguments, named in `what` for the error. */
export function positionals(got: string[], what: string[], usage: string): string[] {
  if (got.length < what.length) throw new UsageError(`missing ${what.slice(got.length).join(' ')}\n${usage}`);
  if (got.length > what.length) throw new UsageError(`unexpected argument ${got[what.length]}\n${usage}`);
  return got;
}
