// SSH keys: the controller's own key pair, OpenSSH public key lines (the
// Lease's device keys, a target's host_key) and the host key comparison that
// pinning rests on.
import { createHash, timingSafeEqual } from 'node:crypto';
import ssh2 from 'ssh2';
import { SSH_KEY_TYPES } from '../api/ssh-keys.js';

const { utils } = ssh2;

export const CONTROLLER_KEY_COMMENT = 'leasehold-controller';

export type PublicKeyType = (typeof SSH_KEY_TYPES)[number];

export interface PublicKey {
  type: PublicKeyType;
  /** The key in SSH wire format: what the base64 field decodes to. */
  blob: Buffer;
  comment: string;
}

export type ParsedPublicKey = ({ ok: true } & PublicKey) | { ok: false; error: string };

/** A fresh ed25519 key pair: the private key in OpenSSH format, the public key as one authorized_keys line. */
export function generateControllerKey(comment = CONTROLLER_KEY_COMMENT): { privateKey: string; publicKey: string } {
  // ssh2's generator strips every leading zero byte of the public key, not
  // only the BIT STRING's unused-bits byte, so about one pair in 256 (a key
  // starting with 0x00) comes out 31 bytes long and unusable (mscdex/ssh2
  // #1390). Such a pair is checked for and made again.
  for (let attempt = 0; attempt < 16; attempt++) {
    const pair = utils.generateKeyPairSync('ed25519', { comment });
    const publicKey = pair.public.trim();
    if (parsePublicKey(publicKey).ok && !(utils.parseKey(pair.private) instanceof Error)) return { privateKey: pair.private, publicKey };
  }
  throw new Error('could not generate a well-formed ed25519 key pair');
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
// Printable ASCII and spaces only: a comment is copied into authorized_keys.
const COMMENT = /^[\x20-\x7e]*$/;

/**
 * Checks one OpenSSH public key line, "TYPE BASE64 [COMMENT]", and returns
 * its type and key blob, or what is wrong with it.
 */
export function parsePublicKey(line: string): ParsedPublicKey {
  const text = line.trim();
  if (text === '') return { ok: false, error: 'the key is empty' };
  // Each key becomes one line of authorized_keys: a line break inside would
  // smuggle in a second entry, so anything multi-line is refused outright.
  if (/[\r\n\0]/.test(text)) return { ok: false, error: 'a public key must be a single line' };
  const [type = '', data, ...rest] = text.split(/[ \t]+/);
  const comment = rest.join(' ');
  if (!(SSH_KEY_TYPES as readonly string[]).includes(type)) {
    // authorized_keys options (command=..., from=...) come before the type; they are not ours to accept.
    return { ok: false, error: `"${type.slice(0, 40)}" is not a supported key type; expected one of ${SSH_KEY_TYPES.join(', ')} at the start of the line` };
  }
  if (data === undefined) return { ok: false, error: `the ${type} key has no key data after its type` };
  if (!BASE64.test(data) || data.length % 4 !== 0) return { ok: false, error: `the ${type} key data is not valid base64` };
  if (!COMMENT.test(comment)) return { ok: false, error: 'the comment after the key has characters other than printable ASCII' };
  const blob = Buffer.from(data, 'base64');
  const fields = wireStrings(blob);
  if (!fields) return { ok: false, error: `the ${type} key data is truncated or has trailing bytes` };
  if (fields[0]?.toString('latin1') !== type) {
    return { ok: false, error: `the line says ${type} but the key data holds a ${printable(fields[0])} key` };
  }
  if (type === 'ssh-ed25519' && (fields.length !== 2 || fields[1]?.length !== 32)) {
    return { ok: false, error: 'the ssh-ed25519 key data does not hold a 32-byte key' };
  }
  // ssh2 cannot parse security-key (sk-) types; those get the structural checks above only.
  if (!type.startsWith('sk-')) {
    const problem = ssh2Problem(`${type} ${data}`);
    if (problem) return { ok: false, error: `the ${type} key is malformed: ${problem}` };
  }
  return { ok: true, type: type as PublicKeyType, blob, comment };
}

/** The SHA256 fingerprint of a public key line or key blob, as `ssh-keygen -l` prints it. */
export function fingerprint(key: string | Buffer): string {
  let blob: Buffer;
  if (typeof key === 'string') {
    const parsed = parsePublicKey(key);
    blob = parsed.ok ? parsed.blob : Buffer.from(key.trim().split(/\s+/)[1] ?? '', 'base64');
  } else {
    blob = key;
  }
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/**
 * Whether the host key a server presented (the raw blob ssh2 hands to
 * hostVerifier) is the pinned one ("ssh-ed25519 AAAA..."). A pinned key that
 * does not parse matches nothing.
 */
export function sameHostKey(pinned: string, presented: Buffer): boolean {
  const p = parsePublicKey(pinned);
  return p.ok && p.blob.length === presented.length && timingSafeEqual(p.blob, presented);
}

// Splits SSH wire data into its length-prefixed strings; undefined unless they cover it exactly.
function wireStrings(blob: Buffer): Buffer[] | undefined {
  const out: Buffer[] = [];
  let at = 0;
  while (at < blob.length) {
    if (at + 4 > blob.length) return undefined;
    const len = blob.readUInt32BE(at);
    if (at + 4 + len > blob.length) return undefined;
    out.push(blob.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out.length ? out : undefined;
}

// What ssh2 finds wrong with a key line (it throws on some malformed keys rather than returning an error).
function ssh2Problem(line: string): string | undefined {
  try {
    const parsed = utils.parseKey(line);
    return parsed instanceof Error ? parsed.message : undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

function printable(b: Buffer | undefined): string {
  const s = b?.toString('latin1') ?? '';
  return /^[\x21-\x7e]{1,64}$/.test(s) ? s : 'different';
}
