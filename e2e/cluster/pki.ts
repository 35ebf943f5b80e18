// Certificates and kubeconfigs for a local control plane: one CA per control
// plane, a loopback serving certificate, client certificates per identity and
// the service-account signing key pair.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A client identity: the certificate's CN is the user, each O a group. */
export interface ClientIdentity {
  /** File stem under pki/: `<name>.crt`, `<name>.key`. */
  name: string;
  user: string;
  groups?: string[];
}

export const ADMIN: ClientIdentity = { name: 'admin', user: 'admin', groups: ['system:masters'] };

async function openssl(cwd: string, ...args: string[]): Promise<void> {
  await run('openssl', args, { cwd });
}

const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

// A random serial rather than -CAcreateserial: the optional parts sign their
// client certificates at the same time, and a shared ca.srl file would race.
const serial = () => ['-set_serial', `0x${(randomBytes(16)[0]! & 0x7f).toString(16).padStart(2, '0')}${randomBytes(15).toString('hex')}`];

async function sign(pki: string, name: string, subj: string, ext: string): Promise<void> {
  await openssl(pki, 'req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj);
  await openssl(pki, 'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', ...serial(),
    '-out', `${name}.crt`, '-days', '30', '-extfile', ext);
}

async function signClient(pki: string, id: ClientIdentity): Promise<void> {
  const subj = [...(id.groups ?? []).map((g) => `/O=${g}`), `/CN=${id.user}`].join('');
  await sign(pki, id.name, subj, 'client.ext');
}

/**
 * A CA, a serving certificate for loopback and for the `kubernetes` Service address (which
 * pods on a real node use), an admin client certificate and service-account keys.
 */
export async function generatePKI(pki: string): Promise<void> {
  await mkdir(pki, { recursive: true });
  await openssl(pki, 'req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-subj', '/CN=leasehold-test-ca');
  await writeFile(
    join(pki, 'serving.ext'),
    'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' +
      'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n',
  );
  await writeFile(join(pki, 'client.ext'), 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n');
  await sign(pki, 'serving', '/CN=kube-apiserver', 'serving.ext');
  await signClient(pki, ADMIN);
  await openssl(pki, 'genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'sa.key');
  await openssl(pki, 'pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub');
}

/**
 * A client certificate signed by the control plane's CA and a kubeconfig that
 * uses it; returns the kubeconfig's path.
 */
export async function clientKubeconfig(dir: string, server: string, id: ClientIdentity, clusterName: string): Promise<string> {
  const pki = join(dir, 'pki');
  await signClient(pki, id);
  const path = join(dir, `${id.name}.kubeconfig`);
  await writeFile(path, kubeconfigYAML({ server, ca: join(pki, 'ca.crt'), clusterName, userName: id.name,
    user: { 'client-certificate': join(pki, `${id.name}.crt`), 'client-key': join(pki, `${id.name}.key`) } }), { mode: 0o600 });
  return path;
}

export interface KubeconfigSpec {
  server: string;
  /** Path of the CA bundle that signed the API server's certificate. */
  ca: string;
  clusterName: string;
  userName: string;
  /** The kubeconfig `user` stanza: client-certificate/client-key or token. */
  user: Record<string, string>;
  namespace?: string;
}

export function kubeconfigYAML(spec: KubeconfigSpec): string {
  const user = Object.entries(spec.user).map(([k, v]) => `    ${k}: ${v}`).join('\n');
  return `apiVersion: v1
kind: Config
clusters:
- name: ${spec.clusterName}
  cluster:
    server: ${spec.server}
    certificate-authority: ${spec.ca}
users:
- name: ${spec.userName}
  user:
${user}
contexts:
- name: ${spec.clusterName}
  context:
    cluster: ${spec.clusterName}
    user: ${spec.userName}
    namespace: ${spec.namespace ?? 'default'}
current-context: ${spec.clusterName}
`;
}
