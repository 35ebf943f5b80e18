// What an object must look like before an informer caches it. An API server
// of ours validates what it stores; another cluster's (a peer fleet's) is
// another party's, and may send anything that parses as JSON. Only the
// fields our code reads are checked, with their types; the rest pass as they
// are. A check never throws: it returns the problem, and the informer drops
// the object.
import { z } from 'zod';

const stringMap = z.record(z.string(), z.string()).nullish();

export const objectMetaSchema = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().nullish(),
  uid: z.string().nullish(),
  resourceVersion: z.string().nullish(),
  generation: z.number().nullish(),
  creationTimestamp: z.string().nullish(),
  deletionTimestamp: z.string().nullish(),
  labels: stringMap,
  annotations: stringMap,
  finalizers: z.array(z.string()).nullish(),
  ownerReferences: z.array(z.looseObject({ apiVersion: z.string(), kind: z.string(), name: z.string(), uid: z.string() })).nullish(),
  managedFields: z.array(z.looseObject({})).nullish(),
});

/** Any Kubernetes object: a named metadata of the right types; kind-specific fields are the kind schema's. */
export const kubeObjectSchema = z.looseObject({
  apiVersion: z.string().nullish(),
  kind: z.string().nullish(),
  metadata: objectMetaSchema,
});

/** Why an object was refused: the first field in error and zod's description of it, both bounded, never a value. */
export interface ObjectProblem {
  field: string;
  message: string;
}

export type ObjectCheck = (object: unknown) => ObjectProblem | undefined;

const MAX_SEGMENT = 63;
const MAX_FIELD = 200;

/** The check of an object against `schema`. */
export function objectCheck(schema: z.ZodType): ObjectCheck {
  return (object) => {
    const result = schema.safeParse(object);
    if (result.success) return undefined;
    const issue = result.error.issues[0];
    // Path segments may be keys the sender chose (an annotation's name): bounded and printable.
    const field = (issue?.path ?? [])
      .map((p) => (typeof p === 'number' ? `[${p}]` : `.${printable(String(p)).slice(0, MAX_SEGMENT)}`))
      .join('')
      .replace(/^\./, '')
      .slice(0, MAX_FIELD);
    return { field: field || '(object)', message: printable(issue?.message ?? 'invalid').slice(0, MAX_FIELD) };
  };
}

export const checkKubeObject: ObjectCheck = objectCheck(kubeObjectSchema);

function printable(s: string): string {
  return s.replace(/[\x00-\x1f\x7f]+/g, ' ');
}
