// Pieces shared by every Leasehold kind: API names, object metadata,
// conditions, Secret references, timestamps and durations.

import { z } from 'zod';
import { DURATION_MAX_LENGTH, DURATION_PATTERN, parseDuration } from './duration.js';

import { API_VERSION } from './group.js';

export { API_VERSION, CATEGORY, GROUP, VERSION } from './group.js';

/** A CEL validation rule, as Kubernetes reads it from `x-kubernetes-validations`. */
export interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

/** Metadata keys the CRD generator understands, besides `description`. */
export interface KubeMeta {
  description: string;
  'x-kubernetes-validations'?: CelRule[];
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

/** `.meta()` with the keys Kubernetes adds to a schema, type-checked. */
export function kube<T extends z.ZodType>(schema: T, meta: KubeMeta): T {
  return schema.meta(meta as unknown as Record<string, unknown>) as T;
}

// ---------------------------------------------------------------------------
// Patterns

/** An RFC 1123 DNS subdomain: most object names. */
export const DNS_SUBDOMAIN_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/** An RFC 1123 DNS label: namespaces, node-safe names. */
export const DNS_LABEL_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** A Secret data key. */
export const SECRET_KEY_PATTERN = '^[-._a-zA-Z0-9]+$';
/** A condition type: a CamelCase word, optionally prefixed by a DNS subdomain and "/". */
export const CONDITION_TYPE_PATTERN =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$';
/** A machine-readable reason, as the Kubernetes API conventions define it. */
export const REASON_PATTERN = '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$';
/** A label key, with its optional prefix. */
export const LABEL_KEY_PATTERN =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$';
/** A label value (possibly empty). */
export const LABEL_VALUE_PATTERN = '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$';

export function re(pattern: string): RegExp {
  return new RegExp(pattern);
}

// ---------------------------------------------------------------------------
// Scalars

/** An RFC 3339 timestamp, as Kubernetes writes metav1.Time ("2026-01-02T15:04:05Z"). */
export function timestamp(description: string) {
  return z.iso.datetime({ offset: true }).describe(description);
}

/**
 * A non-negative Go-style duration string ("20m", "1h30m", "90s").
 * Pass `dflt` to give it a default.
 */
export function duration(description: string) {
  return kube(
    z
      .string()
      .max(DURATION_MAX_LENGTH)
      .regex(re(DURATION_PATTERN))
      .refine((s) => durationFits(s), { message: DURATION_RANGE_MESSAGE }),
    {
      description,
      // The pattern admits "9999999999h", which overflows Go's (and
      // parseDuration's) int64 nanoseconds: CEL's duration() refuses it.
      'x-kubernetes-validations': [{ rule: "duration(self) >= duration('0s')", message: DURATION_RANGE_MESSAGE }],
    },
  );
}

const DURATION_RANGE_MESSAGE = 'must be a duration of at most 2562047h (e.g. "20m", "1h30m")';

function durationFits(s: string): boolean {
  try {
    parseDuration(s);
    return true;
  } catch {
    return false;
  }
}

/** A name of a Kubernetes object (DNS subdomain, at most 253 characters). */
export function objectName(description: string) {
  return z.string().min(1).max(253).regex(re(DNS_SUBDOMAIN_PATTERN)).describe(description);
}

/** A namespace name (DNS label, at most 63 characters). */
export function namespaceName(description: string) {
  return z.string().min(1).max(63).regex(re(DNS_LABEL_PATTERN)).describe(description);
}

/** The longest a status message may be (as Kubernetes' own condition messages). */
export const MESSAGE_MAX_CHARS = 32768;

/** A free-form human message. */
export function message(description: string, max = MESSAGE_MAX_CHARS) {
  return z.string().max(max).describe(description);
}

/**
 * `text` cut to at most `max` characters (Unicode code points, as the API
 * server counts maxLength), ending in … when cut: a status write with a
 * longer message would be refused whole (422) and show nothing.
 */
export function fitText(text: string, max = MESSAGE_MAX_CHARS): string {
  if (text.length <= max) return text;
  const points = Array.from(text);
  return points.length <= max ? text : `${points.slice(0, max - 1).join('')}…`;
}

/** A count or generation: a whole number, zero or more. */
export function count(description: string) {
  return z.int().min(0).describe(description);
}

/** US dollars, zero or more. */
export function usd(description: string) {
  return z.number().min(0).describe(description);
}

// ---------------------------------------------------------------------------
// Object metadata

/**
 * The subset of ObjectMeta worth checking at runtime; every other field the
 * API server sends (timestamps, owner references, managed fields) passes
 * through untouched. Its type stays assignable to V1ObjectMeta of
 * @kubernetes/client-node, so parsed objects are KubernetesObjects. The CRD
 * leaves metadata to the API server, as Kubernetes requires.
 */
export const ObjectMetaSchema = z
  .looseObject({
    name: z.string().max(253).optional().describe('Name of the object, unique within its namespace (or the cluster).'),
    generateName: z.string().max(253).optional().describe('Prefix the API server uses to make a unique name.'),
    namespace: z.string().max(63).optional().describe('Namespace of the object; empty for cluster-scoped kinds.'),
    uid: z.string().max(128).optional().describe('Unique ID the API server assigned to the object.'),
    resourceVersion: z.string().max(128).optional().describe('Opaque version, for optimistic concurrency.'),
    generation: z.int().min(0).optional().describe('Sequence number of the desired state (spec).'),
    finalizers: z.array(z.string()).optional().describe('Finalizers that must finish before the object is removed.'),
  })
  .describe('Standard object metadata.');

/** The schema of one kind: apiVersion, kind, metadata, spec, and status (written by the controller only). */
export function kindSchema<K extends string, Spec extends z.ZodType, Status extends z.ZodType>(kind: K, spec: Spec, status: Status, description: string) {
  return z
    .object({
      apiVersion: z.literal(API_VERSION).describe(API_VERSION),
      kind: z.literal(kind).describe(kind),
      metadata: ObjectMetaSchema,
      spec,
      status: status.optional(),
    })
    .describe(description);
}

export type ObjectMeta = z.infer<typeof ObjectMetaSchema>;

// ---------------------------------------------------------------------------
// Conditions

export const CONDITION_STATUSES = ['True', 'False', 'Unknown'] as const;

export const ConditionSchema = z
  .object({
    type: z
      .string()
      .min(1)
      .max(316)
      .regex(re(CONDITION_TYPE_PATTERN))
      .describe('Kind of condition, in CamelCase, e.g. Ready or Scheduled. Unique within the list.'),
    status: z.enum(CONDITION_STATUSES).describe('Whether the condition holds: True, False or Unknown.'),
    observedGeneration: z
      .int()
      .min(0)
      .optional()
      .describe('The metadata.generation the condition was computed from; older than the current generation means stale.'),
    lastTransitionTime: timestamp('When status last changed from one value to another.'),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(re(REASON_PATTERN))
      .describe('Machine-readable cause of the last transition, in CamelCase, e.g. MachineReady or NoMatchingOffer.'),
    message: message('Human-readable details about the last transition; may be empty.'),
  })
  .describe('One observation of the state of the object, per the Kubernetes API conventions.');
export type Condition = z.infer<typeof ConditionSchema>;

/** The standard `conditions` list: a map keyed by `type`. */
export function conditions(description: string) {
  return kube(z.array(ConditionSchema).max(32), {
    description,
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['type'],
  });
}

// ---------------------------------------------------------------------------
// References

/**
 * A reference to one key of a Secret. `defaultKey` becomes the default of
 * `key`; `namespaceRequired` makes the namespace mandatory (cluster-scoped
 * referrers have no namespace to default to).
 */
export function secretKeyRef(
  description: string,
  opts: { defaultKey: string; namespaceRequired?: boolean; keyMeaning: string },
) {
  const ns = namespaceName(
    opts.namespaceRequired
      ? 'Namespace of the Secret. Required, because the referring object is cluster-scoped.'
      : 'Namespace of the Secret; defaults to the namespace of the referring object.',
  );
  return z
    .object({
      name: objectName('Name of the Secret.'),
      namespace: opts.namespaceRequired ? ns : ns.optional(),
      key: z
        .string()
        .min(1)
        .max(253)
        .regex(re(SECRET_KEY_PATTERN))
        .default(opts.defaultKey)
        .describe(`Key within the Secret's data that holds ${opts.keyMeaning}. Defaults to "${opts.defaultKey}".`),
    })
    .strict()
    .describe(description);
}

/**
 * A reference to one key of a Secret in the referring object's own namespace,
 * for namespaced kinds that may be handed to a team. It has no namespace to
 * set: a team that may write the object must not be able to point the
 * controller at another namespace's Secret (cert-manager's Issuer works the
 * same way; only the cluster-scoped Offer names a namespace). A `namespace`
 * key is still declared so that admission refuses it with a reason instead of
 * pruning it silently.
 */
export function localSecretKeyRef(description: string, opts: { defaultKey: string; keyMeaning: string; field: string }) {
  const why = `${opts.field}.namespace is not allowed: the Secret must be in the namespace of this object; remove the namespace and create the Secret here`;
  return kube(
    z
      .object({
        name: objectName('Name of the Secret, in the namespace of this object.'),
        namespace: z
          .string()
          .max(63)
          .optional()
          .describe('Not allowed: the Secret is always read from the namespace of this object.'),
        key: z
          .string()
          .min(1)
          .max(253)
          .regex(re(SECRET_KEY_PATTERN))
          .default(opts.defaultKey)
          .describe(`Key within the Secret's data that holds ${opts.keyMeaning}. Defaults to "${opts.defaultKey}".`),
      })
      .strict()
      .refine((r) => r.namespace === undefined, { message: why, path: ['namespace'] }),
    { description, 'x-kubernetes-validations': [{ rule: '!has(self.namespace)', message: why }] },
  );
}

/** The general shape of a Secret key reference (namespace optional). */
export const SecretKeyRefSchema = secretKeyRef('A key in a Kubernetes Secret.', {
  defaultKey: 'token',
  keyMeaning: 'the value',
});
export type SecretKeyRef = z.infer<typeof SecretKeyRefSchema>;

// ---------------------------------------------------------------------------
// Label selectors

export const LabelSelectorRequirementSchema = z
  .object({
    key: z.string().min(1).max(317).regex(re(LABEL_KEY_PATTERN)).describe('The label key the requirement applies to.'),
    operator: z
      .enum(['In', 'NotIn', 'Exists', 'DoesNotExist'])
      .describe('How the label relates to values: In, NotIn, Exists or DoesNotExist.'),
    values: z
      .array(z.string().max(63).regex(re(LABEL_VALUE_PATTERN)).describe('One label value.'))
      .max(64)
      .optional()
      .describe('Values for In and NotIn (at least one); must be empty for Exists and DoesNotExist.'),
  })
  .strict()
  .describe('A label requirement: a key, an operator and values.');

export const LabelSelectorSchema = z
  .object({
    matchLabels: z
      .record(
        z.string().max(317).regex(re(LABEL_KEY_PATTERN)),
        z.string().max(63).regex(re(LABEL_VALUE_PATTERN)).describe('The label value to match.'),
      )
      .optional()
      .describe('Labels that must all be present with exactly these values.'),
    matchExpressions: z
      .array(LabelSelectorRequirementSchema)
      .max(32)
      .optional()
      .describe('Requirements that must all hold.'),
  })
  .strict();
export type LabelSelector = z.infer<typeof LabelSelectorSchema>;
