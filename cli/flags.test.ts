import { describe, expect, it } from '@jest/globals';
import { parseRunFlags } from './run.js';
import { parseCommand, UsageError } from './flags.js';
import { main } from './main.js';

describe('run flags', () => {
  it('takes --where, --offer, --lease and the command after --, joined as ssh joins it', () => {
    const r = parseRunFlags(['--where', 'gpu=h100', '--offer', 'lambda', '-n', 'ml', '--key', '/k', '--', 'python', 'train.py', '--lr', '3']);
    expect(r.run).toEqual({ where: 'gpu=h100', offer: 'lambda', lease: undefined, command: 'python train.py --lr 3' });
    expect(r.common).toEqual({ kubeconfig: undefined, context: undefined, namespace: 'ml', key: '/k' });
  });

  it.each([
    [['--where', 'cpus>=1', '--bogus', '--', 'true'], /unknown flag --bogus/],
    [['--where'], /flag --where needs a value/],
    [['--where', '--lease', 'x', '--', 'true'], /flag --where needs a value, but the next word is a flag/],
    [['--where', 'cpus>=1'], /nothing to run: give the command after --/],
    [['--where', 'cpus>=1', 'uname', '--', 'x'], /unexpected argument uname: put the command after --/],
    [['--', 'uname'], /--where is required/],
    [['--where', 'gpu=h100,gpu=a100', '--', 'true'], /--where gpu=h100,gpu=a100: /],
    [['--where', 'bananas', '--', 'true'], /--where bananas: /],
    [['--where', '*', '--', 'true'], /--where \*: where "\*" means any runner/],
    [['--where', 'cpus>=1', '--json=x', '--', 'true'], /unknown flag --json/],
  ])('refuses %j, naming the flag', (args, message) => {
    expect(() => parseRunFlags(args)).toThrow(UsageError);
    expect(() => parseRunFlags(args)).toThrow(message);
  });

  it('does not read flags after --', () => {
    expect(parseRunFlags(['--lease', 'box', '--', 'ls', '--where', '-n']).run.command).toBe('ls --where -n');
  });
});

describe('common flags', () => {
  it.each([
    [['--wait=yes'], /flag --wait takes no value/],
    [['-x'], /unknown flag -x/],
    [['--namespace'], /flag --namespace needs a value/],
  ])('%j is a usage error naming the flag', (args, message) => {
    expect(() => parseCommand(args, { wait: { type: 'boolean' } }, 'usage: x')).toThrow(message);
  });
});

describe('main', () => {
  it.each([
    [['run', '--where', 'cpus>=1', '--nope', '--', 'true']],
    [['leases', '--bogus']],
    [['release']],
    [['release', 'a', 'b']],
    [['ssh', '--print']],
    [['frobnicate']],
  ])('%j exits 2 with a message', async (argv) => {
    const writes: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((s: string) => (writes.push(s), true)) as typeof write;
    try {
      expect(await main(argv, {})).toBe(2);
    } finally {
      process.stderr.write = write;
    }
    expect(writes.join('')).toMatch(/^leasehold: (unknown|missing|unexpected|flag)/);
  });
});
