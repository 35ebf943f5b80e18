// Reads the target an acquire command printed: its last non-empty stdout line,
// one JSON object naming how to reach the machine (ssh or url). The line is
// also the state release gets back, extra fields (an instance ID) included.
// Every refusal says what was wrong and what the provider should print.
import { isIP } from 'node:net';
import type { MachineTarget, SshTarget } from '../types.js';
import { STDOUT_CAP_BYTES, sanitizeLine } from './run.js';

export const TARGET_MAX_DEPTH = 32;
export const DEFAULT_SSH_PORT = 22;

const EXAMPLE = '{"ssh":{"host":"10.0.0.5","host_key":"ssh-ed25519 AAAA…"}}';
const URL_SCHEMES = ['http', 'https', 'ssh'];
const HOST_KEY_TYPES = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'ssh-rsa',
];
const DNS_LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;
const LOGIN_NAME = /^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export type ParsedTarget = { ok: true; target: MachineTarget; state: string } | { ok: false; reason: string };

export function parseTarget(stdout: string): ParsedTarget {
  if (Buffer.byteLength(stdout, 'utf8') > STDOUT_CAP_BYTES) {
    return refuse('acquire printed more than 16 KiB on stdout; print only the target JSON object there and send logs to stderr');
  }
  const line = lastLine(stdout);
  if (line === undefined) return refuse(`acquire printed nothing on stdout; print one JSON object on its last stdout line, like ${EXAMPLE}`);
  const parsed = parseObjectLine(line);
  if (!parsed.ok) return refuse(parsed.reason);
  const obj = parsed.value;

  const hasSsh = obj.ssh !== undefined;
  const hasUrl = obj.url !== undefined;
  if (hasSsh && hasUrl) return refuse('acquire printed a target with both "ssh" and "url"; print exactly one of them');
  if (!hasSsh && !hasUrl) {
    return refuse(`acquire printed a JSON object with neither "ssh" nor "url" on its last stdout line; add one, like ${EXAMPLE}`);
  }
  const target = hasSsh ? sshTarget(obj.ssh) : urlTarget(obj.url);
  return typeof target === 'string' ? refuse(target) : { ok: true, target, state: line };
}

/**
 * The state to release with after a failed acquire: the last complete stdout
 * line that is a JSON object (an instance ID may be all release has to go
 * on), or "". With `truncated`, the cut-off final line is not considered.
 */
export function salvageState(stdout: string, truncated: boolean): string {
  const lines = stdout.split('\n');
  if (truncated) lines.pop();
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = (lines[i] ?? '').trim();
    if (line !== '' && parseObjectLine(line).ok) return line;
  }
  return '';
}

function refuse(reason: string): ParsedTarget {
  return { ok: false, reason };
}

function lastLine(stdout: string): string | undefined {
  const lines = stdout.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = (lines[i] ?? '').trim();
    if (line !== '') return line;
  }
  return undefined;
}

type ParsedLine = { ok: true; value: Record<string, unknown> } | { ok: false; reason: string };

function parseObjectLine(line: string): ParsedLine {
  // JSON.parse would build any depth; a deep bomb is refused before parsing.
  if (exceedsDepth(line, TARGET_MAX_DEPTH)) {
    return {
      ok: false,
      reason: `acquire's last stdout line nests JSON deeper than ${TARGET_MAX_DEPTH} levels; print a flat target object, like ${EXAMPLE}`,
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return {
      ok: false,
      reason: `acquire printed no JSON object on its last stdout line (it printed ${excerpt(line)}); print one like ${EXAMPLE}`,
    };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      ok: false,
      reason: `acquire's last stdout line is ${describeJson(value)}, not a JSON object; print one object, like ${EXAMPLE}`,
    };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

function exceedsDepth(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

/** The ssh target with defaults filled in, or why it is refused. */
function sshTarget(ssh: unknown): MachineTarget | string {
  const example = '{"host":"10.0.0.5","port":22,"user":"ubuntu","host_key":"ssh-ed25519 AAAA…"}';
  if (ssh === null || typeof ssh !== 'object' || Array.isArray(ssh)) {
    return `acquire's "ssh" is ${describeJson(ssh)}; it must be an object like ${example}`;
  }
  const fields = ssh as Record<string, unknown>;

  const host = fields.host;
  if (typeof host !== 'string' || host.trim() === '') {
    return `acquire's ssh.host is ${host === undefined ? 'missing' : describeJson(host)}; set it to the machine's DNS name or IP address`;
  }
  const hostProblem = checkHost(host);
  if (hostProblem !== undefined) return `acquire's ssh.host ${excerpt(host)} ${hostProblem}`;

  let port = DEFAULT_SSH_PORT;
  if (fields.port !== undefined) {
    if (typeof fields.port !== 'number' || !Number.isInteger(fields.port) || fields.port < 1 || fields.port > 65535) {
      return `acquire's ssh.port is ${describeJson(fields.port)}; it must be a whole number from 1 to 65535, or left out for ${DEFAULT_SSH_PORT}`;
    }
    port = fields.port;
  }

  const target: SshTarget = { host: unbracket(host), port };
  if (fields.user !== undefined) {
    if (typeof fields.user !== 'string' || !LOGIN_NAME.test(fields.user)) {
      return `acquire's ssh.user is ${describeJson(fields.user)}; it must be a login name of letters, digits, ".", "_" and "-" (at most 32, not starting with "-"), or left out`;
    }
    target.user = fields.user;
  }
  if (fields.host_key !== undefined) {
    const hostKey = typeof fields.host_key === 'string' ? parseHostKey(fields.host_key) : { problem: 'it is not a string' };
    if (hostKey.problem !== undefined) {
      return `acquire's ssh.host_key ${excerpt(fields.host_key)} is not an OpenSSH public key line: ${hostKey.problem}; print the machine's host public key as "type base64", e.g. the contents of /etc/ssh/ssh_host_ed25519_key.pub`;
    }
    target.hostKey = hostKey.key;
  }
  return { ssh: target };
}

/** The target with its URL normalized, or why it is refused. */
function urlTarget(url: unknown): MachineTarget | string {
  const example = '"https://10.0.0.5:7070" or "ssh://ubuntu@10.0.0.5:22"';
  if (typeof url !== 'string' || url.trim() === '') return `acquire's "url" is ${describeJson(url)}; it must be a URL like ${example}`;
  const text = url.trim();
  if (text.startsWith('/') || text.startsWith('.') || text.startsWith('@')) {
    return `acquire's url ${excerpt(text)} is a local socket path; local sockets are refused: print a network URL like ${example}`;
  }
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return `acquire's url ${excerpt(text)} is not an absolute URL; print one like ${example}`;
  }
  const scheme = parsed.protocol.replace(/:$/, '').toLowerCase();
  if (scheme === 'file' || scheme.includes('unix')) {
    return `acquire's url ${excerpt(text)} names a local socket; local sockets are refused: print a network URL like ${example}`;
  }
  if (!URL_SCHEMES.includes(scheme)) {
    return `acquire's url ${excerpt(text)} has scheme "${scheme}", which the controller cannot connect with; use http://, https:// or ssh://`;
  }
  if (parsed.hostname === '') return `acquire's url ${excerpt(text)} names no host; print one like ${example}`;
  const hostProblem = checkHost(decodeURIComponentSafe(parsed.hostname));
  if (hostProblem !== undefined) return `acquire's url host ${excerpt(parsed.hostname)} ${hostProblem}`;
  return { url: parsed.href };
}

/** Why `host` is not a DNS name or IP literal, said as the rest of a sentence, or undefined when it is one. */
function checkHost(host: string): string | undefined {
  const fix = "give the machine's DNS name or IP address";
  if (host.includes('/')) return `is a local socket path; local sockets are refused: ${fix}`;
  const bare = unbracket(host);
  if (isIP(bare) !== 0) return undefined;
  if (bare !== host) return `is not an IPv6 address inside its brackets; ${fix}`;
  const name = host.endsWith('.') ? host.slice(0, -1) : host;
  const labels = name.split('.');
  const last = labels[labels.length - 1] ?? '';
  if (name.length > 253 || !labels.every((l) => DNS_LABEL.test(l)) || /^[0-9]+$/.test(last)) {
    return `is not a DNS name or IP address (only letters, digits, "-", "_" and dots; no spaces, slashes or shell characters); ${fix}`;
  }
  return undefined;
}

function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function parseHostKey(line: string): { key: string; problem?: undefined } | { key?: undefined; problem: string } {
  // "type base64" with an optional trailing comment, as in a .pub file.
  const [type = '', data = ''] = line.trim().split(/\s+/);
  // A security key (sk-) signs for a user holding a token, never for a server: the SSH client refuses it as a host key.
  if (type.startsWith('sk-')) return { problem: `its key type ${excerpt(type)} is a security-key type, which cannot be a host key; use one of ${HOST_KEY_TYPES.join(', ')}` };
  if (!HOST_KEY_TYPES.includes(type)) {
    return { problem: `its key type ${excerpt(type)} is not one of ${HOST_KEY_TYPES.join(', ')}` };
  }
  if (data === '' || data.length % 4 !== 0 || !BASE64.test(data)) return { problem: 'the second field is not base64 key data' };
  const blob = Buffer.from(data, 'base64');
  const nameLength = blob.length >= 4 ? blob.readUInt32BE(0) : -1;
  if (nameLength < 0 || 4 + nameLength > blob.length || blob.toString('latin1', 4, 4 + nameLength) !== type) {
    return { problem: `its key data does not hold a ${type} key` };
  }
  return { key: `${type} ${data}` };
}

function describeJson(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a JSON array';
  switch (typeof value) {
    case 'string':
      return `the string ${excerpt(value)}`;
    case 'number':
    case 'boolean':
      return `the ${typeof value} ${String(value)}`;
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}

/** A short, printable, quoted piece of untrusted text for a message. */
function excerpt(value: unknown): string {
  const text = sanitizeLine(typeof value === 'string' ? value : JSON.stringify(value) ?? String(value));
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 59)}…` : text);
}
