import { describe, it, expect } from '@jest/globals';
import ssh2 from 'ssh2';
import { fingerprint, generateControllerKey, parsePublicKey, sameHostKey } from './keys.js';

// Made with ssh-keygen; the fingerprints are what `ssh-keygen -lf` printed for them.
const ED25519 = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2S7R35QnZ+YxASDMqnxl2yWQyQQ7HjJ2DRyJWc8qcD alice@laptop';
const ED25519_FP = 'SHA256:ul7L49pzYAUjaNx8p8C3Wz2i+NZ84sVyTRrbDNSRE04';
const RSA =
  'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCvOMZP83vNkOKkMmDg39DbWzhR8OoOyyjJKfP/Tp+vyvo1ePnz++S6GUWG5JHg7yTVYOurlpkXj6dNo0dNfeb9MMPK+URfvw+drlqCilALxxDtH2vETPUlSNRlkMWRSZaqpQsGj4EcKt5CUQ6rKhVVrkjlznUGMRWM3PLt6WJeu7aZrgKPVlvFKPJuxmuRkU5kPD1OWqfOv4farA9U6ewCVsUYJPeXrOGaSOxyNldZKO6BJOkO0799sQvLkSBe7WGwtQj8GwcARarZA2PI2pUThX53864kaomWmyI9wTmMJAJNpvrIvu9Z0IHadAqSyor9D4Mw5gbAK0n2DkHnk7sd bob';
const RSA_FP = 'SHA256:otF6Mo5zFRJSqHpp8pxw04szR59qiFP1ShOu6c/kIoA';
const ECDSA =
  'ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBIZiWAyH86VGaaPYvl/Fr9U2JnDXeTH/0GhCO6PAoGsZoQ4t+okehLZsSkQ6JCRQ3/dC4eO2fUDkkvDBBX13kts= carol';
const ECDSA_FP = 'SHA256:yZsjOovtbt75Ja0gdO/6yPHh2ru9CwlaCn7LAc0c1eQ';

const wire = (...fields: (string | Buffer)[]) =>
  Buffer.concat(
    fields.flatMap((f) => {
      const b = typeof f === 'string' ? Buffer.from(f) : f;
      const len = Buffer.alloc(4);
      len.writeUInt32BE(b.length);
      return [len, b];
    }),
  );
const ED25519_DATA = ED25519.split(' ')[1]!;
const SECURITY_KEY = `sk-ssh-ed25519@openssh.com ${wire('sk-ssh-ed25519@openssh.com', Buffer.alloc(32, 7), 'ssh:').toString('base64')} yubikey`;

describe('generateControllerKey', () => {
  it('makes an ed25519 pair: an OpenSSH private key and a one-line public key named leasehold-controller', () => {
    const key = generateControllerKey();
    expect(key.privateKey).toMatch(/^-----BEGIN OPENSSH PRIVATE KEY-----\n/);
    expect(key.publicKey).toMatch(/^ssh-ed25519 AAAA[A-Za-z0-9+/]+=* leasehold-controller$/);
    const priv = ssh2.utils.parseKey(key.privateKey);
    if (priv instanceof Error) throw priv;
    expect(priv.isPrivateKey()).toBe(true);
    const pub = parsePublicKey(key.publicKey);
    expect(pub.ok && pub.blob.equals(priv.getPublicSSH())).toBe(true);
  });

  it('makes again a pair the generator cut short (a public key starting with a zero byte loses it), so none is ever unusable', () => {
    const real = ssh2.utils.generateKeyPairSync;
    let calls = 0;
    // What ssh2 hands out about once in 256: the public key one byte short, the private key with it.
    const cut = (pair: ReturnType<typeof real>) => {
      const [type, data, comment] = pair.public.trim().split(' ');
      const blob = Buffer.from(data!, 'base64');
      return { ...pair, public: `${type} ${wire('ssh-ed25519', blob.subarray(blob.length - 31)).toString('base64')} ${comment}` };
    };
    ssh2.utils.generateKeyPairSync = ((...args: Parameters<typeof real>) => (calls++ === 0 ? cut(real(...args)) : real(...args))) as typeof real;
    try {
      const key = generateControllerKey();
      expect(calls).toBe(2);
      expect(parsePublicKey(key.publicKey).ok).toBe(true);
      expect(ssh2.utils.parseKey(key.privateKey)).not.toBeInstanceOf(Error);
    } finally {
      ssh2.utils.generateKeyPairSync = real;
    }
  });

  it('makes a different pair each time', () => {
    expect(generateControllerKey().publicKey).not.toBe(generateControllerKey().publicKey);
  });
});

describe('parsePublicKey', () => {
  it.each([
    ['ed25519', ED25519, 'ssh-ed25519', 'alice@laptop'],
    ['rsa', RSA, 'ssh-rsa', 'bob'],
    ['ecdsa', ECDSA, 'ecdsa-sha2-nistp256', 'carol'],
    ['security key', SECURITY_KEY, 'sk-ssh-ed25519@openssh.com', 'yubikey'],
    ['no comment', `ssh-ed25519 ${ED25519_DATA}`, 'ssh-ed25519', ''],
    ['a comment with spaces, and a trailing newline', `${ED25519} work laptop\n`, 'ssh-ed25519', 'alice@laptop work laptop'],
  ])('accepts %s', (_name, line, type, comment) => {
    const got = parsePublicKey(line);
    expect(got).toMatchObject({ ok: true, type, comment });
    expect(got.ok && got.blob.length).toBeGreaterThan(32);
  });

  it.each([
    ['an empty line', '  ', /empty/],
    ['two lines', `${ED25519}\n${RSA}`, /single line/],
    ['authorized_keys options', `command="/bin/sh" ${ED25519}`, /"command="\/bin\/sh"" is not a supported key type/],
    ['an unknown type', `ssh-dss ${ED25519_DATA}`, /"ssh-dss" is not a supported key type/],
    ['no key data', 'ssh-ed25519', /no key data/],
    ['data that is not base64', 'ssh-ed25519 AAAA$$$$', /not valid base64/],
    ['badly padded base64', `ssh-ed25519 ${ED25519_DATA.slice(0, -1)}`, /not valid base64/],
    ['a type that does not match the data', `ssh-ed25519 ${RSA.split(' ')[1]}`, /says ssh-ed25519 but the key data holds a ssh-rsa key/],
    ['truncated data', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2S7R35', /truncated/],
    ['an ed25519 key of the wrong size', `ssh-ed25519 ${wire('ssh-ed25519', Buffer.alloc(16)).toString('base64')}`, /32-byte key/],
    ['a control character in the comment', `${ED25519} evil\u001b[2J`, /printable ASCII/],
    ['an rsa key with broken numbers', `ssh-rsa ${wire('ssh-rsa', Buffer.alloc(0), Buffer.alloc(0)).toString('base64')}`, /malformed/],
  ])('refuses %s, saying what is wrong', (_name, line, error) => {
    const got = parsePublicKey(line);
    expect(got.ok).toBe(false);
    expect(!got.ok && got.error).toMatch(error);
  });
});

describe('fingerprint', () => {
  it.each([
    [ED25519, ED25519_FP],
    [RSA, RSA_FP],
    [ECDSA, ECDSA_FP],
  ])('matches ssh-keygen -l for %s', (line, fp) => {
    expect(fingerprint(line)).toBe(fp);
  });

  it('takes a raw key blob too', () => {
    const p = parsePublicKey(ED25519);
    expect(p.ok && fingerprint(p.blob)).toBe(ED25519_FP);
  });
});

describe('sameHostKey', () => {
  const blob = Buffer.from(ED25519_DATA, 'base64');

  it('is true when the presented key is the pinned one, whatever the comment', () => {
    expect(sameHostKey(ED25519, blob)).toBe(true);
    expect(sameHostKey(`ssh-ed25519 ${ED25519_DATA}`, blob)).toBe(true);
  });

  it('is false for any other key', () => {
    expect(sameHostKey(RSA, blob)).toBe(false);
    expect(sameHostKey(ED25519, Buffer.from(RSA.split(' ')[1]!, 'base64'))).toBe(false);
    expect(sameHostKey(ED25519, blob.subarray(0, 20))).toBe(false);
  });

  it('is false when the pinned key does not parse', () => {
    expect(sameHostKey('', blob)).toBe(false);
    expect(sameHostKey(`ssh-rsa ${ED25519_DATA}`, blob)).toBe(false);
  });
});
