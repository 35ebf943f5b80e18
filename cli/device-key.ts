// The device key: one ed25519 key pair per device (per user account on a
// machine), made on first use. Its public half goes into spec.sshKeys of the
// Leases this device uses; the private half never leaves the file, and a file
// other users could read is refused, as ssh refuses it.
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { homedir, hostname, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import ssh2 from 'ssh2';
import { generateControllerKey, parsePublicKey } from '../src/machine/keys.js';

const { utils } = ssh2;

export interface DeviceKey {
  path: string;
  privateKey: string;
  /** The authorized_keys line: "ssh-ed25519 AAAA... leasehold@host". */
  publicKey: string;
  /** The key blob in base64: how spec.sshKeys entries are compared (comments aside). */
  id: string;
}

/** The default key file: $XDG_CONFIG_HOME/leasehold/id_ed25519, or ~/.config/leasehold/id_ed25519. */
export function defaultKeyPath(env: NodeJS.ProcessEnv, home = homedir()): string {
  const config = env.XDG_CONFIG_HOME?.startsWith('/') ? env.XDG_CONFIG_HOME : join(home, '.config');
  return join(config, 'leasehold', 'id_ed25519');
}

/** Why a key file with this mode and owner must not be used, or undefined when it may. */
export function keyFileProblem(path: string, mode: number, owner: number, uid: number): string | undefined {
  if (owner !== uid) return `${path} belongs to user ${owner}, not to you (${uid}); use your own key file (--key) or remove it so a new one is made`;
  if ((mode & 0o077) !== 0) {
    return `${path} has mode ${(mode & 0o777).toString(8).padStart(3, '0')}, so other users can read the private key; run chmod 600 ${path}`;
  }
  return undefined;
}

/**
 * Reads the device key at `path`, making it (mode 600, in a mode 700
 * directory) when there is none. Throws when the file is unsafe or not an
 * ed25519/OpenSSH private key.
 */
export function loadDeviceKey(path: string, uid = process.getuid?.() ?? 0): DeviceKey {
  let st;
  try {
    st = statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return create(path);
  }
  const problem = keyFileProblem(path, st.mode, st.uid, uid);
  if (problem) throw new Error(problem);
  const privateKey = readFileSync(path, 'utf8');
  const parsed = utils.parseKey(privateKey);
  if (parsed instanceof Error || !parsed.isPrivateKey()) {
    throw new Error(`${path} is not an unencrypted OpenSSH private key; remove it to have a new one made, or name another with --key`);
  }
  const publicKey = `${parsed.type} ${parsed.getPublicSSH().toString('base64')} ${comment()}`;
  return { path, privateKey, publicKey, id: keyID(publicKey) };
}

/** The base64 key blob of a public key line, or the trimmed line itself when it cannot be parsed. */
export function keyID(line: string): string {
  const parsed = parsePublicKey(line);
  return parsed.ok ? parsed.blob.toString('base64') : line.trim();
}

function create(path: string): DeviceKey {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const pair = generateControllerKey(comment());
  try {
    // flag wx: never overwrite a key another process made in the meantime; use that one.
    writeFileSync(path, pair.privateKey, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return loadDeviceKey(path);
    throw err;
  }
  const publicKey = pair.publicKey;
  writeFileSync(`${path}.pub`, `${publicKey}\n`, { mode: 0o644 });
  return { path, privateKey: pair.privateKey, publicKey, id: keyID(publicKey) };
}

function comment(): string {
  // Printable ASCII only: the comment is copied into authorized_keys.
  return `leasehold@${userInfo().username}.${hostname()}`.replace(/[^\x21-\x7e]/g, '');
}
