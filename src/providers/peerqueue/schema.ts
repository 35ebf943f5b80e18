// What a peer Job must look like before our watch of the peer queue caches
// it: the fields lending reads (claims, fit, the mirror's template and run
// rules, status write-back), with the types a Kubernetes API server gives
// them. The peer's API server is the peer's, not ours: a Job with a string
// where we read a map would otherwise reach lending, mirror or safety code
// that trusts the type.
import { z } from 'zod';
import { objectCheck, objectMetaSchema } from '../../kube/objectschema.js';

const int = z.number().int().nullish();
const bool = z.boolean().nullish();
const str = z.string().nullish();
const quantities = z.record(z.string(), z.union([z.string(), z.number()])).nullish();
const list = <T extends z.ZodType>(item: T) => z.array(item).nullish();

const securityContext = z
  .looseObject({
    runAsUser: int,
    runAsGroup: int,
    runAsNonRoot: bool,
    privileged: bool,
    allowPrivilegeEscalation: bool,
    readOnlyRootFilesystem: bool,
    procMount: str,
    capabilities: z.looseObject({ add: list(z.string()), drop: list(z.string()) }).nullish(),
    seccompProfile: z.looseObject({ type: str }).nullish(),
    appArmorProfile: z.looseObject({ type: str }).nullish(),
    seLinuxOptions: z.looseObject({ type: str, user: str, role: str, level: str }).nullish(),
    sysctls: list(z.looseObject({ name: z.string(), value: z.string() })),
  })
  .nullish();

const container = z.looseObject({
  name: z.string(),
  image: str,
  imagePullPolicy: str,
  command: list(z.string()),
  args: list(z.string()),
  env: list(z.looseObject({ name: z.string(), value: str })),
  envFrom: list(z.looseObject({})),
  ports: list(z.looseObject({ hostPort: int, hostIP: str })),
  resources: z.looseObject({ requests: quantities, limits: quantities }).nullish(),
  restartPolicy: str,
  securityContext,
  volumeMounts: list(z.looseObject({ name: z.string(), mountPath: z.string() })),
});

const podSpec = z.looseObject({
  containers: z.array(container),
  initContainers: list(container),
  ephemeralContainers: list(z.looseObject({ name: z.string() })),
  volumes: list(z.looseObject({ name: z.string() })),
  hostNetwork: bool,
  hostPID: bool,
  hostIPC: bool,
  nodeName: str,
  nodeSelector: z.record(z.string(), z.string()).nullish(),
  tolerations: list(z.looseObject({ key: str, operator: str, value: str, effect: str, tolerationSeconds: int })),
  overhead: quantities,
  resourceClaims: list(z.looseObject({})),
  securityContext,
  serviceAccountName: str,
  automountServiceAccountToken: bool,
  restartPolicy: str,
  activeDeadlineSeconds: int,
  terminationGracePeriodSeconds: int,
});

const condition = z.looseObject({ type: z.string(), status: z.string(), reason: str, message: str, lastTransitionTime: str });

export const peerJobSchema = z.looseObject({
  apiVersion: str,
  kind: str,
  metadata: objectMetaSchema,
  spec: z
    .looseObject({
      parallelism: int,
      completions: int,
      completionMode: str,
      backoffLimit: int,
      activeDeadlineSeconds: int,
      suspend: bool,
      managedBy: str,
      template: z.looseObject({
        metadata: z.looseObject({ labels: z.record(z.string(), z.string()).nullish(), annotations: z.record(z.string(), z.string()).nullish() }).nullish(),
        spec: podSpec,
      }),
    })
    .nullish(),
  status: z
    .looseObject({
      conditions: list(condition),
      startTime: str,
      completionTime: str,
      active: int,
      ready: int,
      succeeded: int,
      failed: int,
      terminating: int,
    })
    .nullish(),
});

export const checkPeerJob = objectCheck(peerJobSchema);
