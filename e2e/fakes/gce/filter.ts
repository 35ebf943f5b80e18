// The `filter` of instances.list, in the subset the emulator understands:
// terms `FIELD = VALUE`, `FIELD != VALUE`, `FIELD : *` (has), or the regular
// expression form `FIELD eq RE` / `FIELD ne RE` (a full match), each
// optionally in parentheses, joined by AND or by juxtaposition, over the
// fields name, status and labels.KEY. Anything else is refused as Google
// refuses a filter it cannot parse, so a client cannot rely on more.
import { HttpError } from '../kit/http.js';

export type InstanceFields = { name: string; status: string; labels: Record<string, string> };
type Term = (i: InstanceFields) => boolean;

const TERM = /\s*\(?\s*([A-Za-z][\w.-]*)\s*(!=|=|:|eq\b|ne\b)\s*(?:"([^"]*)"|'([^']*)'|([^\s()"']+))\s*\)?\s*/y;

function invalid(filter: string, why: string): HttpError {
  return new HttpError(400, 'invalid', `Invalid value for field 'filter': '${filter}'. ${why}`);
}

function fieldOf(i: InstanceFields, field: string): string | undefined {
  if (field === 'name') return i.name;
  if (field === 'status') return i.status;
  return i.labels[field.slice('labels.'.length)];
}

export interface FilterRules {
  /**
   * Regular-expression terms on more than one field are a 400, as the API
   * reference's `filter` parameter says ("You cannot combine constraints on
   * multiple fields using regular expressions"). Default true.
   */
  refuseRegexAcrossFields?: boolean;
}

/** A predicate for the filter; an empty filter matches everything. */
export function parseFilter(filter: string, rules: FilterRules = {}): Term {
  const terms: Term[] = [];
  const regexFields = new Set<string>();
  let at = 0;
  let style: 'aip' | 'regex' | undefined;
  while (at < filter.length) {
    if (filter.slice(at).trim() === '') break;
    TERM.lastIndex = at;
    const m = TERM.exec(filter);
    if (!m) throw invalid(filter, 'Expected FIELD = VALUE, FIELD != VALUE, FIELD : VALUE, FIELD eq REGEX or FIELD ne REGEX.');
    at = TERM.lastIndex;
    const and = /^AND\s+/.exec(filter.slice(at));
    if (and) at += and[0].length;
    const [, field, op, dq, sq, bare] = m as unknown as [string, string, string, string | undefined, string | undefined, string | undefined];
    const value = dq ?? sq ?? bare ?? '';
    if (field !== 'name' && field !== 'status' && !/^labels\.[a-z][\w-]*$/.test(field)) throw invalid(filter, `The emulator filters on name, status and labels.KEY, not ${field}.`);
    const termStyle = op === 'eq' || op === 'ne' ? 'regex' : 'aip';
    if (style && style !== termStyle) throw invalid(filter, 'Regular expression (eq, ne) and comparison (=, !=, :) terms cannot be mixed.');
    style = termStyle;
    if (op === 'eq' || op === 'ne') {
      regexFields.add(field);
      if (regexFields.size > 1 && rules.refuseRegexAcrossFields !== false) throw invalid(filter, 'Constraints on multiple fields cannot be combined using regular expressions.');
      let re: RegExp;
      try {
        re = new RegExp(`^(?:${value})$`);
      } catch {
        throw invalid(filter, `${value} is not a regular expression.`);
      }
      terms.push((i) => {
        const v = fieldOf(i, field);
        return op === 'eq' ? v !== undefined && re.test(v) : v === undefined || !re.test(v);
      });
    } else if (op === ':') {
      terms.push((i) => {
        const v = fieldOf(i, field);
        return v !== undefined && (value === '*' || v.includes(value));
      });
    } else {
      terms.push((i) => (op === '=' ? fieldOf(i, field) === value : fieldOf(i, field) !== value));
    }
  }
  return (i) => terms.every((t) => t(i));
}
