// SSH keys: the controller's own key pair, and comparing a pinned host key
// with the one a machine presents.
import { createHash } from 'node:crypto';
import ssh2 from 'ssh2';

const { utils } = ssh2;

export function generateControllerKey(comment = 'leasehold-controller'): { privateKey: string; publicKey: string } {
  const pair = utils.generateKeyPairSync('ed25519', { comment });
  return { privateKey: pair.private, publicKey: pair.public.trim() };
}

export function parsePublicKey(line: string): { ok: true; type: string; blob: Buffer } | { ok: false; error: string } {
  const parts = line.trim().split(/\s+/);
  if (parts.length < 2) return { ok: false, error: 'expected "<type> <base64> [comment]"' };
  const blob = Buffer.from(parts[1]!, 'base64');
  if (blob.length < 16 || blob.toString('base64').replace(/=+$/, '') !== parts[1]!.replace(/=+$/, '')) {
    return { ok: false, error: 'the key material is not valid base64' };
  }
  const typeLen = blob.readUInt32BE(0);
  const inner = blob.subarray(4, 4 + typeLen).toString();
  if (inner !== parts[0]) return { ok: false, error: `the key says it is ${inner || 'nothing'} but is labelled ${parts[0]}` };
  return { ok: true, type: parts[0]!, blob };
}

/** SHA256 fingerprint as ssh-keygen -l prints it. */
export function fingerprint(keyOrBlob: string | Buffer): string {
  const blob = typeof keyOrBlob === 'string' ? Buffer.from(keyOrBlob.trim().split(/\s+/)[1] ?? '', 'base64') : keyOrBlob;
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

export function sameHostKey(pinned: string, presented: Buffer): boolean {
  const p = parsePublicKey(pinned);
  return p.ok && p.blob.equals(presented);
}
