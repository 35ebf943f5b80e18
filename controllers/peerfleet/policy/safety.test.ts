import { describe, expect, it } from '@jest/globals';
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import { unsafeFields } from './safety.js';

const c = (over: Partial<V1Container> = {}): V1Container => ({ name: 'main', image: 'trainer:1', ...over });
const spec = (over: Partial<V1PodSpec> = {}, container: Partial<V1Container> = {}): V1PodSpec => ({ containers: [c(container)], restartPolicy: 'Never', ...over });

describe('unsafeFields', () => {
  it.each<[string, V1PodSpec, RegExp]>([
    ['host network', spec({ hostNetwork: true }), /^spec.template.spec.hostNetwork is true/],
    ['host PID', spec({ hostPID: true }), /hostPID is true/],
    ['host IPC', spec({ hostIPC: true }), /hostIPC is true/],
    ['a hostPath volume', spec({ volumes: [{ name: 'root', hostPath: { path: '/' } }] }), /volumes\[0\] is a hostPath volume: a lent Job may have only emptyDir and downward API volumes/],
    ['a Secret volume', spec({ volumes: [{ name: 's', secret: { secretName: 'ours' } }] }), /volumes\[0\] is a secret volume/],
    ['a ConfigMap volume', spec({ volumes: [{ name: 's', configMap: { name: 'ours' } }] }), /is a configMap volume/],
    ['a claim on our storage', spec({ volumes: [{ name: 's', persistentVolumeClaim: { claimName: 'ours' } }] }), /is a persistentVolumeClaim volume/],
    ['a projected token', spec({ volumes: [{ name: 't', projected: { sources: [{ serviceAccountToken: { path: 't' } }] } }] }), /projects serviceAccountToken: only downwardAPI/],
    ['a projected Secret', spec({ volumes: [{ name: 't', projected: { sources: [{ downwardAPI: {} }, { secret: { name: 'x' } }] } }] }), /projects secret/],
    ['device claims', spec({ resourceClaims: [{ name: 'gpu' }] }), /resourceClaims is set/],
    ['root by pod', spec({ securityContext: { runAsUser: 0 } }), /securityContext.runAsUser is 0/],
    ['runAsNonRoot false', spec({ securityContext: { runAsNonRoot: false } }), /runAsNonRoot is false/],
    ['sysctls', spec({ securityContext: { sysctls: [{ name: 'net.core.somaxconn', value: '1024' }] } }), /sysctls is set/],
    ['seccomp unconfined', spec({ securityContext: { seccompProfile: { type: 'Unconfined' } } }), /seccompProfile is Unconfined/],
    ['an SELinux role', spec({ securityContext: { seLinuxOptions: { role: 'sysadm_r' } } }), /seLinuxOptions/],
    ['env from our Secret', spec({}, { env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'ours', key: 'k' } } }] }), /containers\[0\].env\[0\] \(TOKEN\) reads a Secret/],
    ['env from our ConfigMap', spec({}, { env: [{ name: 'CFG', valueFrom: { configMapKeyRef: { name: 'ours', key: 'k' } } }] }), /reads a ConfigMap/],
    ['envFrom a Secret', spec({}, { envFrom: [{ secretRef: { name: 'ours' } }] }), /envFrom\[0\] reads a Secret/],
    ['privileged', spec({}, { securityContext: { privileged: true } }), /containers\[0\].securityContext.privileged is true/],
    ['privilege escalation', spec({}, { securityContext: { allowPrivilegeEscalation: true } }), /allowPrivilegeEscalation is true/],
    ['added capabilities', spec({}, { securityContext: { capabilities: { add: ['SYS_ADMIN'] } } }), /capabilities.add is SYS_ADMIN/],
    ['unmasked /proc', spec({}, { securityContext: { procMount: 'Unmasked' } }), /procMount is Unmasked/],
    ['a container as root', spec({}, { securityContext: { runAsUser: 0 } }), /containers\[0\].securityContext.runAsUser is 0/],
    ['a host port', spec({}, { ports: [{ containerPort: 80, hostPort: 80 }] }), /hostPort is 80/],
    ['block devices', spec({}, { volumeDevices: [{ name: 'd', devicePath: '/dev/x' }] }), /volumeDevices is set/],
    ['a probe aimed at another host', spec({}, { livenessProbe: { httpGet: { host: '169.254.169.254', port: 80, path: '/' } } }), /livenessProbe targets host 169.254.169.254/],
    ['a hook aimed at another host', spec({}, { lifecycle: { preStop: { tcpSocket: { host: '10.0.0.1', port: 22 } } } }), /lifecycle.preStop targets host 10.0.0.1/],
    ['an init container with a Secret', spec({ initContainers: [c({ envFrom: [{ configMapRef: { name: 'x' } }] })] }), /initContainers\[0\].envFrom\[0\] reads a ConfigMap/],
  ])('refuses %s', (_name, s, want) => {
    const problems = unsafeFields(s);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(want);
  });

  it.each<[string, V1PodSpec]>([
    ['a plain GPU job', spec({}, { resources: { limits: { 'nvidia.com/gpu': '1' } } })],
    ['emptyDir, downward API and projected downward API', spec({ volumes: [{ name: 'scratch', emptyDir: { medium: 'Memory' } }, { name: 'info', downwardAPI: { items: [] } }, { name: 'p', projected: { sources: [{ downwardAPI: {} }] } }] })],
    ['env from fields and literals', spec({}, { env: [{ name: 'A', value: '1' }, { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] })],
    ['a non-root user and a probe of its own pod', spec({ securityContext: { runAsUser: 1000, runAsNonRoot: true } }, { readinessProbe: { httpGet: { port: 8080, path: '/' } } })],
    ['dropping capabilities', spec({}, { securityContext: { capabilities: { drop: ['ALL'] }, allowPrivilegeEscalation: false } })],
  ])('accepts %s', (_name, s) => {
    expect(unsafeFields(s)).toEqual([]);
  });

  it('lists every problem, not only the first', () => {
    expect(unsafeFields(spec({ hostNetwork: true, volumes: [{ name: 'h', hostPath: { path: '/' } }] }, { securityContext: { privileged: true } }))).toHaveLength(3);
  });

  it('refuses an empty template', () => {
    expect(unsafeFields(undefined)).toEqual(['spec.template.spec is empty']);
  });
});
