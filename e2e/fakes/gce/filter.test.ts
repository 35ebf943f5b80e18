// The emulator's reading of the `filter` parameter of instances.list and
// aggregatedList, by the grammar of the pinned discovery document's
// description (filter.ts): what each filter selects, and what is refused.
import { describe, it, expect } from '@jest/globals';
import { HttpError } from '../kit/http.js';
import { parseFilter, type InstanceFields } from './filter.js';

const INSTANCES: InstanceFields[] = [
  { name: 'list-a-1', status: 'RUNNING', labels: { env: 'prod', tier: '2', team: 'ml' } },
  { name: 'list-a-2', status: 'STOPPED', labels: { env: 'dev', tier: '10' } },
  { name: 'list-b-1', status: 'RUNNING', labels: { env: 'prod' } },
];

const selected = (filter: string, rules = {}) => INSTANCES.filter(parseFilter(filter, rules)).map((i) => i.name);

function refusal(filter: string): HttpError {
  try {
    parseFilter(filter);
  } catch (e) {
    expect(e).toBeInstanceOf(HttpError);
    return e as HttpError;
  }
  throw new Error(`expected ${filter} to be refused`);
}

const A = 'list-a-1';
const B = 'list-a-2';
const C = 'list-b-1';

describe('the filter grammar of the discovery document', () => {
  it.each<[string, string[]]>([
    ['', [A, B, C]],
    ['   ', [A, B, C]],
    // One expression may stand alone, unparenthesized, or in parentheses.
    ['name = list-a-1', [A]],
    ['name = "list-a-1"', [A]],
    ['(name = list-a-1)', [A]],
    ['name != list-a-1', [B, C]],
    ['labels.nothing != x', [A, B, C]],
    // `:*`: the field is defined, with or without spaces.
    ['labels.team:*', [A]],
    ['labels.team : *', [A]],
    // Ordering: numbers as numbers, anything else as strings; an undefined field matches none.
    ['labels.tier > 9', [B]],
    ['labels.tier < 9', [A]],
    ['labels.tier >= 2', [A, B]],
    ['labels.tier <= 2', [A]],
    ['name > list-a-2', [C]],
    ['name >= "list-a-2"', [B, C]],
    // Several expressions, each parenthesized: AND by default, AND and OR explicitly.
    ['(labels.env = prod) (status = RUNNING)', [A, C]],
    ['\n(labels.env = prod)\n(status = RUNNING)\n', [A, C]],
    ['(labels.env = "prod") AND (labels.team:*)', [A]],
    ['(labels.env = dev) OR (labels.team = ml)', [A, B]],
    // OR binds tighter than AND: (STOPPED or ml) and prod, not STOPPED or (ml and prod).
    ['(status = STOPPED) OR (labels.team = ml) AND (labels.env = prod)', [A]],
    ['(labels.env = prod) (status = RUNNING) OR (status = STOPPED)', [A, C]],
    // Regular expressions: RE2 matching the whole field, the literal bare, single- or double-quoted.
    ['name eq list-a-.*', [A, B]],
    ["name eq 'list-a-1'", [A]],
    ['name eq "list-(a|b)-1"', [A, C]],
    ['name eq list-(a|b)-1', [A, C]],
    ['name ne .*-1', [B]],
    ['name eq list', []],
    ['(name eq list-(a|b)-1) (name ne list-b-.*)', [A]],
    ['(name eq "list-a-\\d")', [A, B]],
    ['(labels.env eq prod)', [A, C]],
  ])('%j selects %j', (filter, want) => {
    expect(selected(filter)).toEqual(want);
  });

  it.each<[string, RegExp]>([
    // More than one expression, not each in parentheses: the form the client used to send.
    ['labels.a = "x" AND labels.b = "y"', /put each in parentheses/],
    ['labels.env = prod AND status = RUNNING', /put each in parentheses/],
    ['name = a OR name = b', /put each in parentheses/],
    ['labels.env = prod status = RUNNING', /put each in parentheses/],
    ['name = a (status = RUNNING)', /put each in parentheses/],
    ['(name = a) status = RUNNING', /must be in parentheses/],
    ['(name = a) AND status = RUNNING', /must be in parentheses/],
    // A parenthesis holds one comparison.
    ['(name = a AND status = RUNNING)', /holds one expression/],
    ['((name = a))', /field name/],
    ['()', /field name/],
    ['(name = a', /Expected \)/],
    // Joins: a space, AND or OR (upper case), between parenthesized expressions.
    ['(name = a)(status = RUNNING)', /separated by a space/],
    ['(name = a) and (status = RUNNING)', /field name|must be in parentheses/],
    ['(name = a) AND', /expression after AND/],
    ['(name = a) OR ', /expression after OR/],
    ['(name = a) OR OR (name = b)', /must be in parentheses/],
    ['(name = a) AND(status = RUNNING)', /space and a parenthesized expression after AND/],
    ['NOT name = a', /Expected one of/],
    ['-name = a', /field name/],
    // Comparisons.
    ['name', /Expected one of/],
    ['name ~ a', /Expected one of/],
    ['name =', /Expected a value/],
    ['name : a', /takes only \*/],
    ["name = 'a'", /Expected a value/],
    ['name = "a', /not closed/],
    ['zone = us-central1-a', /not zone/],
    // Regular expressions.
    ['name eq', /Expected a value/],
    ['name eq (', /not a regular expression|not closed/],
    ['(name eq list-a-.*) (labels.env = prod)', /cannot be mixed/],
    ['(name eq list-.*) AND (name ne list-b-.*)', /joined by a space only/],
    ['(labels.env eq prod) (labels.team eq ml)', /multiple fields/],
  ])('refuses %j', (filter, why) => {
    const e = refusal(filter);
    expect({ status: e.status, code: e.code }).toEqual({ status: 400, code: 'invalid' });
    expect(e.message).toContain(`Invalid value for field 'filter': '${filter}'. Invalid list filter expression.`);
    expect(e.message).toMatch(why);
  });

  it('takes regular expressions on several fields with refuseRegexAcrossFields off', () => {
    expect(selected('(labels.env eq prod) (name eq list-a-.*)', { refuseRegexAcrossFields: false })).toEqual([A]);
  });
});
