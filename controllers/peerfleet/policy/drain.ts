// Whether a node stops taking peer Jobs, and why (Karpenter's disruption
// reasons are the model: one reason per decision, in a fixed order, each
// message saying what to change). Draining only stops new claims: a mirror
// Job that runs is never deleted, so a peer Job is never cut off halfway.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { durationMs, type PeerFleetSpec } from '../../../src/api/index.js';
import type { Occupancy } from './idle.js';
import { LENDING_ANNOTATION, RESERVED_GPUS_ANNOTATION, VALUE_ANNOTATION } from '../labels.js';

export const DRAIN_REASONS = [
  'Deleted',
  'Unlisted',
  'NodeUnlisted',
  'ReservedGPUsUnreadable',
  'OurWorkRunning',
  'ValueUnreadable',
  'OurWorkQueued',
  'OurWorkWorthMore',
  'MaxSessionDuration',
] as const;
export type DrainReason = (typeof DRAIN_REASONS)[number];

export type DrainDecision =
  | { drain: false; withheldGPUs: number; message?: string }
  | { drain: true; reason: DrainReason; message: string };

export interface DrainInput {
  spec: Pick<PeerFleetSpec, 'listed' | 'pricePerGPUHour' | 'ownWorkValuePerGPUHour' | 'maxSessionDuration'>;
  /** The PeerFleet has a deletionTimestamp. */
  deleting: boolean;
  node: V1Node;
  occupancy: Occupancy;
  /** When the node's lending session started (RFC 3339), if one runs. */
  sessionStartedAt?: string | undefined;
  now: number;
}

const PRICE = /^(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?$/;

/** A price in US dollars written as a plain decimal ("2", "2.50"); undefined for anything else. */
export function parsePrice(value: string): number | undefined {
  const v = value.trim();
  return PRICE.test(v) ? Number(v) : undefined;
}

/** The node's withheld GPUs, or why the annotation cannot be read. */
export function reservedGPUs(node: V1Node): { ok: true; gpus: number } | { ok: false; message: string } {
  const raw = node.metadata?.annotations?.[RESERVED_GPUS_ANNOTATION];
  if (raw === undefined) return { ok: true, gpus: 0 };
  if (/^(0|[1-9][0-9]{0,3})$/.test(raw.trim())) return { ok: true, gpus: Number(raw.trim()) };
  const name = node.metadata?.name ?? '';
  return {
    ok: false,
    message: `node ${name} has ${RESERVED_GPUS_ANNOTATION}: ${JSON.stringify(raw)}, not a whole number of GPUs; fix it with kubectl annotate node ${name} ${RESERVED_GPUS_ANNOTATION}=1 --overwrite`,
  };
}

const drain = (reason: DrainReason, message: string): DrainDecision => ({ drain: true, reason, message });

export function drainDecision(input: DrainInput): DrainDecision {
  const { spec, node, occupancy, now } = input;
  const name = node.metadata?.name ?? '';
  if (input.deleting) return drain('Deleted', 'the PeerFleet is being deleted; running peer Jobs finish, nothing new is claimed');
  if (!spec.listed) return drain('Unlisted', 'spec.listed is false; set it to true to lend again');
  const lending = node.metadata?.annotations?.[LENDING_ANNOTATION];
  if (lending !== undefined && lending !== 'on') {
    return drain('NodeUnlisted', `node ${name} has ${LENDING_ANNOTATION}: ${JSON.stringify(lending)}; lend it again with kubectl annotate node ${name} ${LENDING_ANNOTATION}-`);
  }
  const reserved = reservedGPUs(node);
  if (!reserved.ok) return drain('ReservedGPUsUnreadable', reserved.message);
  if (occupancy.kind === 'busy') return drain('OurWorkRunning', occupancy.message);
  if (occupancy.kind === 'wanted') {
    const priced = priceQueued(occupancy.pods, spec, name);
    if (priced) return priced;
  }
  const max = durationMs(spec.maxSessionDuration);
  const started = Date.parse(input.sessionStartedAt ?? '');
  if (max > 0 && Number.isFinite(started) && now >= started + max) {
    return drain('MaxSessionDuration', `the session has run spec.maxSessionDuration (${spec.maxSessionDuration}); a new session may start once the node is idle`);
  }
  const outbid = occupancy.kind === 'wanted' ? `${occupancy.message}, but is worth no more than pricePerGPUHour ${spec.pricePerGPUHour}; lending goes on` : undefined;
  return outbid ? { drain: false, withheldGPUs: reserved.gpus, message: outbid } : { drain: false, withheldGPUs: reserved.gpus };
}

/**
 * Our queued work against the peer's price: a pod's own annotation, else
 * spec.ownWorkValuePerGPUHour. Worth more drains; a tie keeps lending; a
 * value that cannot be read drains, since our work may be worth anything.
 */
function priceQueued(pods: readonly V1Pod[], spec: DrainInput['spec'], node: string): DrainDecision | undefined {
  for (const pod of pods) {
    const id = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const raw = pod.metadata?.annotations?.[VALUE_ANNOTATION];
    if (raw === undefined) continue;
    const value = parsePrice(raw);
    if (value === undefined) {
      return drain(
        'ValueUnreadable',
        `our pending pod ${id} could run on node ${node} and its ${VALUE_ANNOTATION} is ${JSON.stringify(raw)}, not US dollars per GPU-hour; set it, e.g. ${VALUE_ANNOTATION}: "2.50", on the pod template`,
      );
    }
    if (value > spec.pricePerGPUHour) {
      return drain('OurWorkWorthMore', `our pending pod ${id} could run on node ${node} and is worth ${value} per GPU-hour (${VALUE_ANNOTATION}), more than pricePerGPUHour ${spec.pricePerGPUHour}`);
    }
  }
  const unpriced = pods.find((p) => p.metadata?.annotations?.[VALUE_ANNOTATION] === undefined);
  if (!unpriced) return undefined;
  const id = `${unpriced.metadata?.namespace}/${unpriced.metadata?.name}`;
  if (spec.ownWorkValuePerGPUHour === undefined) {
    return drain('OurWorkQueued', `our pending pod ${id} could run on node ${node}; it has no ${VALUE_ANNOTATION} and spec.ownWorkValuePerGPUHour is unset, so any queued work of ours drains`);
  }
  if (spec.ownWorkValuePerGPUHour > spec.pricePerGPUHour) {
    return drain('OurWorkWorthMore', `our pending pod ${id} could run on node ${node} and is worth spec.ownWorkValuePerGPUHour ${spec.ownWorkValuePerGPUHour}, more than pricePerGPUHour ${spec.pricePerGPUHour}`);
  }
  return undefined;
}
