import { describe, expect, it } from '@jest/globals';
import { readSecretKey, secretDataReader, SecretKeyError, type SecretDataReader } from './secrets.js';

const use = { field: 'spec.credentialSecretRef', what: 'the bearer token', defaultKey: 'token' };
const fixed = (data: Record<string, string> | undefined): SecretDataReader => async () => data;
const failing = (code: number): SecretDataReader => async () => {
  throw Object.assign(new Error(`HTTP ${code}`), { code });
};

async function problemOf(p: Promise<unknown>): Promise<SecretKeyError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SecretKeyError) return err;
    throw err;
  }
  throw new Error('expected a SecretKeyError');
}

describe('readSecretKey', () => {
  it('returns the trimmed value of the default key', async () => {
    await expect(readSecretKey(fixed({ token: ' s3cret\n' }), { name: 'peer', namespace: 'ops' }, use)).resolves.toBe('s3cret');
  });

  it('reads the key the reference names', async () => {
    await expect(readSecretKey(fixed({ other: 'x' }), { name: 'peer', namespace: 'ops', key: 'other' }, use)).resolves.toBe('x');
  });

  it.each([
    ['no namespace', fixed({}), { name: 'peer' }, 'SecretAbsent', /spec\.credentialSecretRef\.namespace is empty/],
    ['absent Secret', fixed(undefined), { name: 'peer', namespace: 'ops' }, 'SecretAbsent', /Secret ops\/peer \(spec\.credentialSecretRef\) does not exist; create it with the bearer token under key token/],
    ['absent key', fixed({ other: 'x' }), { name: 'peer', namespace: 'ops' }, 'KeyAbsent', /Secret ops\/peer has no non-empty key token \(spec\.credentialSecretRef\.key\); put the bearer token there/],
    ['blank key', fixed({ token: '  ' }), { name: 'peer', namespace: 'ops' }, 'KeyAbsent', /no non-empty key token/],
    ['forbidden', failing(403), { name: 'peer', namespace: 'ops' }, 'Forbidden', /not readable by the controller; add namespace ops to the chart's secretNamespaces value/],
    ['other error', failing(500), { name: 'peer', namespace: 'ops' }, 'Unreadable', /could not be read: HTTP 500/],
  ] as const)('%s', async (_name, read, ref, problem, message) => {
    const err = await problemOf(readSecretKey(read, ref, use));
    expect(err.problem).toBe(problem);
    expect(err.message).toMatch(message);
  });
});

describe('secretDataReader', () => {
  it('decodes data and maps 404 to undefined', async () => {
    const read = secretDataReader({
      readNamespacedSecret: (async ({ name }: { name: string }) => {
        if (name === 'gone') throw Object.assign(new Error('not found'), { code: 404 });
        return { data: { token: Buffer.from('abc').toString('base64') } };
      }) as never,
    });
    await expect(read('ops', 'peer')).resolves.toEqual({ token: 'abc' });
    await expect(read('ops', 'gone')).resolves.toBeUndefined();
  });
});
