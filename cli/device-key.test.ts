import { describe, expect, it } from '@jest/globals';
import { chmodSync, existsSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultKeyPath, keyFileProblem, keyID, loadDeviceKey } from './device-key.js';

describe('device key file', () => {
  it.each([
    [{ XDG_CONFIG_HOME: '/cfg' }, '/cfg/leasehold/id_ed25519'],
    [{}, '/home/u/.config/leasehold/id_ed25519'],
    // A relative XDG_CONFIG_HOME is invalid per the XDG spec and ignored.
    [{ XDG_CONFIG_HOME: 'rel' }, '/home/u/.config/leasehold/id_ed25519'],
  ])('with %j the default is %s', (env, want) => {
    expect(defaultKeyPath(env, '/home/u')).toBe(want);
  });

  it.each([
    [0o100600, 1000, undefined],
    [0o100400, 1000, undefined],
    [0o100640, 1000, /mode 640, so other users can read the private key; run chmod 600 \/k/],
    [0o100604, 1000, /mode 604/],
    [0o100660, 1000, /mode 660/],
    [0o100600, 0, /belongs to user 0, not to you \(1000\)/],
  ])('mode %o owned by %i: %p', (mode, owner, problem) => {
    const got = keyFileProblem('/k', mode, owner, 1000);
    if (problem === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(problem);
  });

  it('is made on first use with mode 600 in a mode 700 directory, then read back as the same key', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'lh-key-')), 'leasehold', 'id_ed25519');
    const made = loadDeviceKey(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700);
    expect(made.publicKey).toMatch(/^ssh-ed25519 [A-Za-z0-9+/]+=* leasehold@/);
    expect(readFileSync(`${path}.pub`, 'utf8').trim()).toBe(made.publicKey);
    const again = loadDeviceKey(path);
    expect(again.id).toBe(made.id);
    expect(keyID(again.publicKey.replace(/ \S+$/, ' another-comment'))).toBe(made.id);
  });

  it('refuses a key file other users can read, and one that is not a private key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-key-'));
    const path = join(dir, 'id_ed25519');
    loadDeviceKey(path);
    chmodSync(path, 0o644);
    expect(() => loadDeviceKey(path)).toThrow(`${path} has mode 644, so other users can read the private key; run chmod 600 ${path}`);
    const junk = join(dir, 'junk');
    writeFileSync(junk, 'not a key', { mode: 0o600 });
    expect(() => loadDeviceKey(junk)).toThrow(/is not an unencrypted OpenSSH private key/);
  });

  it('never writes the public key through a symbolic link, and says so', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-key-'));
    const victim = join(dir, 'authorized_keys');
    writeFileSync(victim, 'precious\n');
    const path = join(dir, 'id_ed25519');
    symlinkSync(victim, `${path}.pub`);
    expect(() => loadDeviceKey(path)).toThrow(`${path}.pub is a symbolic link; leasehold writes its key files only as plain files: remove it, or name another key file with --key`);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });

  it('never writes the private key through a symbolic link, even a dangling one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-key-'));
    const path = join(dir, 'id_ed25519');
    symlinkSync(join(dir, 'elsewhere'), path);
    expect(() => loadDeviceKey(path)).toThrow(/is a symbolic link/);
    expect(existsSync(join(dir, 'elsewhere'))).toBe(false);
  });

  it('replaces a public key left from a private key that is gone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-key-'));
    const path = join(dir, 'id_ed25519');
    writeFileSync(`${path}.pub`, 'stale\n');
    const key = loadDeviceKey(path);
    expect(readFileSync(`${path}.pub`, 'utf8')).toBe(`${key.publicKey}\n`);
  });
});
