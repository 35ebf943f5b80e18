// What a Lambda instance's cloud-init would take from `#cloud-config` user
// data: host keys and extra authorized keys. Nothing else in it is run.
import { parse as parseYaml } from 'yaml';
import type { HostKeyInput, HostKeyType } from './machine.js';

export function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** The host keys cloud-init would install from `#cloud-config` user data (ssh_keys: {<type>_private, <type>_public}). */
export function hostKeysFromUserData(userData: string | undefined): { keys: HostKeyInput[]; notes: string[]; authorizedKeys: string[] } {
  const out = { keys: [] as HostKeyInput[], notes: [] as string[], authorizedKeys: [] as string[] };
  if (userData === undefined || userData === '') return out;
  if (userData.split('\n', 1)[0]!.trim() !== '#cloud-config') {
    out.notes.push('user_data is not #cloud-config; nothing taken from it');
    return out;
  }
  let doc: unknown;
  try {
    doc = parseYaml(userData);
  } catch (e) {
    out.notes.push(`user_data is not valid YAML (${(e as Error).message.split('\n')[0]}); nothing taken from it`);
    return out;
  }
  if (!doc || typeof doc !== 'object') return out;
  const d = doc as Record<string, unknown>;
  const keys = d.ssh_keys;
  if (keys && typeof keys === 'object') {
    const k = keys as Record<string, unknown>;
    for (const type of ['ed25519', 'ecdsa', 'rsa'] as HostKeyType[]) {
      const priv = k[`${type}_private`];
      const pub = k[`${type}_public`];
      if (typeof priv === 'string') out.keys.push(typeof pub === 'string' ? { type, privateKey: priv, publicKey: pub } : { type, privateKey: priv });
      else if (typeof pub === 'string') out.notes.push(`user_data has ${type}_public without ${type}_private; ignored`);
    }
  }
  if (isStringArray(d.ssh_authorized_keys)) out.authorizedKeys.push(...d.ssh_authorized_keys);
  return out;
}
