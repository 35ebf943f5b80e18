// Whether a pod's own placement rules admit a node, as the scheduler's
// NodeName/NodeAffinity/TaintToleration filters judge it: nodeSelector, the
// required node affinity, and tolerations against NoSchedule and NoExecute
// taints. Resources are not judged here: a pod of ours that waits for room
// on a node still wants that node.
import type { V1Node, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1PodSpec, V1Taint, V1Toleration } from '@kubernetes/client-node';

/** Why the node is not admitted, or undefined when it is. */
export function placementRefusal(spec: V1PodSpec | undefined, node: V1Node): string | undefined {
  const name = node.metadata?.name ?? '';
  if (spec?.nodeName && spec.nodeName !== name) return `bound to node ${spec.nodeName}`;
  const labels = node.metadata?.labels ?? {};
  for (const [key, value] of Object.entries(spec?.nodeSelector ?? {})) {
    if (labels[key] !== value) return `nodeSelector ${key}=${value} does not match`;
  }
  const terms = spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (terms && !terms.some((t) => termMatches(t, labels, name))) return 'required node affinity does not match';
  const untolerated = (node.spec?.taints ?? []).find((t) => t.effect !== 'PreferNoSchedule' && !tolerated(t, spec?.tolerations ?? []));
  if (untolerated) return `taint ${untolerated.key}${untolerated.value ? `=${untolerated.value}` : ''}:${untolerated.effect} is not tolerated`;
  return undefined;
}

export function admits(spec: V1PodSpec | undefined, node: V1Node): boolean {
  return placementRefusal(spec, node) === undefined;
}

/** A term with no requirements matches nothing, as in the scheduler. */
function termMatches(term: V1NodeSelectorTerm, labels: Record<string, string>, name: string): boolean {
  const exprs = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (exprs.length === 0 && fields.length === 0) return false;
  return (
    exprs.every((r) => requirementMatches(r, labels[r.key])) &&
    fields.every((r) => r.key === 'metadata.name' && requirementMatches(r, name))
  );
}

function requirementMatches(r: V1NodeSelectorRequirement, value: string | undefined): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
    case 'Lt': {
      const have = Number.parseInt(value ?? '', 10);
      const want = Number.parseInt(values[0] ?? '', 10);
      if (!Number.isInteger(have) || !Number.isInteger(want)) return false;
      return r.operator === 'Gt' ? have > want : have < want;
    }
    default:
      return false;
  }
}

export function tolerated(taint: V1Taint, tolerations: readonly V1Toleration[]): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === 'Exists') return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
  });
}
