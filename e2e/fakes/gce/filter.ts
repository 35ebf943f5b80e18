// The `filter` of instances.list and aggregatedList, as the `filter` parameter
// of the pinned discovery document (discovery.json) describes it:
//
// - a comparison is FIELD OP VALUE, OP one of = != > < <= >= and `:`, which the
//   text documents only as `:*` (the field is defined); a VALUE is a string
//   (bare or double-quoted), a number or a boolean;
// - or the regular-expression form FIELD eq RE / FIELD ne RE (RE2, matching the
//   whole field; the literal bare, 'single' or "double" quoted);
// - one expression may stand alone, unparenthesized; several must each be in
//   parentheses, AND by default, with AND and OR allowed explicitly between
//   comparisons (the text gives no example of them between regular
//   expressions, so they are refused there);
// - the two forms cannot be mixed, and regular expressions cannot constrain
//   more than one field.
//
// Fields are limited to name, status and labels.KEY: a filter on any other is
// refused, so that no client comes to rely on fields the emulator would get
// wrong. Anything else is refused as Google refuses a filter it cannot parse.
import { HttpError } from '../kit/http.js';

export type InstanceFields = { name: string; status: string; labels: Record<string, string> };
type Predicate = (i: InstanceFields) => boolean;

export interface FilterRules {
  /**
   * Regular-expression terms on more than one field are a 400, as the
   * parameter's description says ("You cannot combine constraints on
   * multiple fields using regular expressions"). Default true.
   */
  refuseRegexAcrossFields?: boolean;
}

type Op = '=' | '!=' | '>' | '<' | '<=' | '>=' | ':' | 'eq' | 'ne';

interface Comparison {
  field: string;
  op: Op;
  value: string;
}

/** A filter as read: its comparisons, and what joins each to the one before (the first has none). */
export interface ParsedFilter {
  comparisons: Comparison[];
  joins: ('AND' | 'OR' | 'implicit')[];
  parenthesized: boolean;
}

// Compute Engine's own words for a filter it cannot read, then the emulator's, saying what broke it.
function invalid(filter: string, why: string): HttpError {
  return new HttpError(400, 'invalid', `Invalid value for field 'filter': '${filter}'. Invalid list filter expression. ${why}`);
}

const FIELD = /[A-Za-z_][\w.-]*/y;
const BARE_VALUE = /[^\s()"']+/y;
const SPACE = /\s*/y;

class Reader {
  at = 0;
  constructor(readonly text: string) {}

  space(): number {
    SPACE.lastIndex = this.at;
    SPACE.exec(this.text);
    const skipped = SPACE.lastIndex - this.at;
    this.at = SPACE.lastIndex;
    return skipped;
  }

  done(): boolean {
    return this.at >= this.text.length;
  }

  peek(s: string): boolean {
    return this.text.startsWith(s, this.at);
  }

  take(re: RegExp): string | undefined {
    re.lastIndex = this.at;
    const m = re.exec(this.text);
    if (!m) return undefined;
    this.at = re.lastIndex;
    return m[0];
  }

  /** A word (AND, OR, eq, ne) that ends where a space, a parenthesis or the text does. */
  word(w: string): boolean {
    if (!this.peek(w)) return false;
    const after = this.text[this.at + w.length];
    if (after !== undefined && !/[\s()]/.test(after)) return false;
    this.at += w.length;
    return true;
  }
}

/**
 * A quoted string; the reader is at its opening quote. A backslash escapes the
 * quote; in a regular expression (`regex`) any other backslash is the
 * expression's own and stays.
 */
function quoted(r: Reader, filter: string, quote: '"' | "'", regex: boolean): string {
  let out = '';
  for (let i = r.at + 1; i < r.text.length; i++) {
    const c = r.text[i]!;
    if (c === '\\' && i + 1 < r.text.length && (!regex || r.text[i + 1] === quote)) {
      out += r.text[++i];
    } else if (c === quote) {
      r.at = i + 1;
      return out;
    } else {
      out += c;
    }
  }
  throw invalid(filter, `A ${quote} string is not closed.`);
}

/**
 * The bare literal of a regular expression: the rest of the filter when the
 * expression stands alone, else up to the parenthesis that closes it (the
 * expression's own parentheses balanced).
 */
function bareRegex(r: Reader, filter: string, inParens: boolean): string {
  if (!inParens) {
    const rest = r.text.slice(r.at).trim();
    r.at = r.text.length;
    return rest;
  }
  let depth = 0;
  for (let i = r.at; i < r.text.length; i++) {
    const c = r.text[i];
    if (c === '(') depth++;
    else if (c === ')') {
      if (depth === 0) {
        const literal = r.text.slice(r.at, i).trim();
        r.at = i;
        return literal;
      }
      depth--;
    }
  }
  throw invalid(filter, 'A parenthesis is not closed.');
}

function comparison(r: Reader, filter: string, inParens: boolean): Comparison {
  r.space();
  const field = r.take(FIELD);
  if (!field) throw invalid(filter, 'Expected a field name.');
  r.space();
  let op: Op | undefined;
  for (const o of ['!=', '<=', '>=', '=', '<', '>', ':'] as const) {
    if (r.peek(o)) {
      op = o;
      r.at += o.length;
      break;
    }
  }
  if (!op && r.word('eq')) op = 'eq';
  if (!op && r.word('ne')) op = 'ne';
  if (!op) throw invalid(filter, `Expected one of = != > < <= >= : eq ne after ${field}.`);
  r.space();
  let value: string | undefined;
  const regex = op === 'eq' || op === 'ne';
  if (r.peek('"')) value = quoted(r, filter, '"', regex);
  else if (regex) value = r.peek("'") ? quoted(r, filter, "'", true) : bareRegex(r, filter, inParens);
  else value = r.take(BARE_VALUE);
  if (value === undefined || (value === '' && regex)) throw invalid(filter, `Expected a value after ${field} ${op}.`);
  // The description documents `:` only as `:*`, whether a field is defined.
  if (op === ':' && value !== '*') throw invalid(filter, 'The : operator takes only * (FIELD:* tests whether FIELD is defined).');
  if (field !== 'name' && field !== 'status' && !/^labels\.[a-z][\w-]*$/.test(field)) throw invalid(filter, `The emulator filters on name, status and labels.KEY, not ${field}.`);
  return { field, op, value };
}

/** Reads a filter by the grammar of the parameter's description; throws a 400 HttpError where it breaks it. */
export function readFilter(filter: string): ParsedFilter {
  const r = new Reader(filter);
  r.space();
  if (r.done()) return { comparisons: [], joins: [], parenthesized: false };
  if (!r.peek('(')) {
    const only = comparison(r, filter, false);
    r.space();
    if (!r.done()) throw invalid(filter, 'To filter on more than one expression, put each in parentheses: (a = "x") (b = "y").');
    return { comparisons: [only], joins: [], parenthesized: false };
  }
  const comparisons: Comparison[] = [];
  const joins: ParsedFilter['joins'] = [];
  for (;;) {
    if (!r.peek('(')) throw invalid(filter, 'Each expression of several must be in parentheses.');
    r.at++;
    comparisons.push(comparison(r, filter, true));
    r.space();
    if (!r.peek(')')) throw invalid(filter, 'Expected ) after an expression; a parenthesis holds one expression.');
    r.at++;
    const spaced = r.space() > 0;
    if (r.done()) break;
    if (!spaced) throw invalid(filter, 'Parenthesized expressions are separated by a space, as in the description\'s examples.');
    if (r.word('AND')) joins.push('AND');
    else if (r.word('OR')) joins.push('OR');
    else {
      joins.push('implicit');
      continue;
    }
    if (r.space() === 0 || r.done()) throw invalid(filter, `Expected a space and a parenthesized expression after ${joins.at(-1)}.`);
  }
  return { comparisons, joins, parenthesized: true };
}

function fieldOf(i: InstanceFields, field: string): string | undefined {
  if (field === 'name') return i.name;
  if (field === 'status') return i.status;
  return i.labels[field.slice('labels.'.length)];
}

const NUMBER = /^-?\d+(\.\d+)?$/;

/** Orders two values as numbers when both are numbers, else as strings. */
function order(a: string, b: string): number {
  if (NUMBER.test(a) && NUMBER.test(b)) return Number(a) - Number(b);
  return a < b ? -1 : a > b ? 1 : 0;
}

function predicateOf(c: Comparison, filter: string): Predicate {
  const { field, op, value } = c;
  switch (op) {
    case 'eq':
    case 'ne': {
      let re: RegExp;
      try {
        re = new RegExp(`^(?:${value})$`);
      } catch {
        throw invalid(filter, `${value} is not a regular expression.`);
      }
      return (i) => {
        const v = fieldOf(i, field);
        return op === 'eq' ? v !== undefined && re.test(v) : v === undefined || !re.test(v);
      };
    }
    case ':':
      return (i) => fieldOf(i, field) !== undefined;
    case '=':
      return (i) => fieldOf(i, field) === value;
    case '!=':
      return (i) => fieldOf(i, field) !== value;
    default:
      return (i) => {
        const v = fieldOf(i, field);
        if (v === undefined) return false;
        const d = order(v, value);
        return op === '>' ? d > 0 : op === '<' ? d < 0 : op === '>=' ? d >= 0 : d <= 0;
      };
  }
}

/** A predicate for the filter; an empty filter matches everything. */
export function parseFilter(filter: string, rules: FilterRules = {}): Predicate {
  const parsed = readFilter(filter);
  const regex = parsed.comparisons.filter((c) => c.op === 'eq' || c.op === 'ne');
  if (regex.length > 0 && regex.length < parsed.comparisons.length) throw invalid(filter, 'Regular-expression (eq, ne) and comparison (=, !=, >, <, <=, >=, :) expressions cannot be mixed.');
  if (regex.length > 0 && parsed.joins.some((j) => j !== 'implicit')) throw invalid(filter, 'Regular-expression expressions are joined by a space only.');
  if (new Set(regex.map((c) => c.field)).size > 1 && rules.refuseRegexAcrossFields !== false) throw invalid(filter, 'Constraints on multiple fields cannot be combined using regular expressions.');
  const predicates = parsed.comparisons.map((c) => predicateOf(c, filter));
  // OR binds tighter than AND, as in AIP-160, which the description names; its example,
  // (Skylake) OR (Broadwell) AND (automaticRestart), reads sensibly only that way.
  const conjuncts: Predicate[][] = [];
  predicates.forEach((p, k) => {
    if (k > 0 && parsed.joins[k - 1] === 'OR') conjuncts.at(-1)!.push(p);
    else conjuncts.push([p]);
  });
  return (i) => conjuncts.every((any) => any.some((p) => p(i)));
}
