// Kubernetes label selector semantics (metav1.LabelSelector): every
// matchLabels pair and every matchExpressions requirement must hold; an
// empty selector selects everything.
import type { LabelSelector } from '../api/common.js';

export function selects(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (!selector) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const req of selector.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, req.key);
    const value = labels[req.key];
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
        if (!has || !values.includes(value!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(value!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}
