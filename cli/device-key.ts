// The device key: one ed25519 key pair per device (per user account on a
// machine), made on first use. Its public half goes into spec.sshKeys of the
// Leases this device uses; the private half never leaves the file, and a file
// other users could read is refused, as ssh refuses it.
import { closeSync, constants, lstatSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
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
  refuseLink(path);
  try {
    // Exclusive: never overwrite a key another process made in the meantime; use that one.
    writeNew(path, pair.privateKey, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return loadDeviceKey(path);
    throw err;
  }
  const publicKey = pair.publicKey;
  const pub = `${path}.pub`;
  refuseLink(pub);
  try {
    writeNew(pub, `${publicKey}\n`, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // A public key left from a private key that is gone: replaced, never written through.
    refuseLink(pub);
    unlinkSync(pub);
    writeNew(pub, `${publicKey}\n`, 0o644);
  }
  return { path, privateKey: pair.privateKey, publicKey, id: keyID(publicKey) };
}

/**
 * Creates `path` and writes `data`: never through a symbolic link (another
 * user who can write the directory could point it at a file of yours), never
 * over an existing file.
 */
function writeNew(path: string, data: string, mode: number): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    writeSync(fd, data);
  } finally {
    closeSync(fd);
  }
}

function refuseLink(path: string): void {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (st.isSymbolicLink()) throw new Error(`${path} is a symbolic link; leasehold writes its key files only as plain files: remove it, or name another key file with --key`);
}

function comment(): string {
  // Printable ASCII only: the comment is copied into authorized_keys.
  return `leasehold@${userInfo().username}.${hostname()}`.replace(/[^\x21-\x7e]/g, '');
}
