// The four kinds as the API server serves them: names, scope, schemas and
// the columns kubectl prints.
import type { z } from 'zod';
import {
  LEASE_NAMES,
  LeaseSchema,
  LeaseSpecSchema,
  LeaseStatusSchema,
} from './lease.js';
import {
  OFFER_NAMES,
  OfferSchema,
  OfferSpecSchema,
  OfferStatusSchema,
} from './offer.js';
import {
  PEERFLEET_NAMES,
  PeerFleetSchema,
  PeerFleetSpecSchema,
  PeerFleetStatusSchema,
} from './peerfleet.js';
import {
  RUNNERTARGET_NAMES,
  RunnerTargetSchema,
  RunnerTargetSpecSchema,
  RunnerTargetStatusSchema,
} from './runnertarget.js';

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description: string;
  priority?: number;
  format?: string;
}

export interface KindDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  scope: 'Namespaced' | 'Cluster';
  /** The whole object, for runtime validation. */
  schema: z.ZodType;
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: PrinterColumn[];
  /** Fields `kubectl get --field-selector` may use. */
  selectableFields?: string[];
}

const age: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'Time since the object was created.',
};

function readyColumn(priority?: number): PrinterColumn {
  return {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    description: 'Status of the Ready condition.',
    ...(priority !== undefined ? { priority } : {}),
  };
}

export const KINDS: readonly KindDefinition[] = [
  {
    ...LEASE_NAMES,
    scope: 'Namespaced',
    schema: LeaseSchema,
    spec: LeaseSpecSchema,
    status: LeaseStatusSchema,
    printerColumns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Where the lease is in its life.' },
      { name: 'Where', type: 'string', jsonPath: '.spec.where', description: 'What the machine must have.' },
      { name: 'Offer', type: 'string', jsonPath: '.status.offer', description: 'The Offer the machine came from.' },
      { name: 'Price/h', type: 'number', jsonPath: '.status.pricePerHour', description: 'US dollars per hour.' },
      { name: 'Host', type: 'string', jsonPath: '.status.machine.ssh.host', description: 'SSH host of the machine.' },
      { name: 'Busy', type: 'string', jsonPath: '.status.usage.busy', description: 'What the last check saw keeping the machine busy, or none.' },
      { name: 'Ended', type: 'string', jsonPath: '.status.endReason', description: 'Why the lease ended (or is ending).' },
      age,
      {
        name: 'Instance-Type',
        type: 'string',
        jsonPath: '.status.instanceType',
        description: 'Provider instance type.',
        priority: 1,
      },
      { name: 'Region', type: 'string', jsonPath: '.status.region', description: 'Region of the machine.', priority: 1 },
      {
        name: 'Expires',
        type: 'string',
        jsonPath: '.status.expiresAt',
        description: 'When maxLifetime releases the machine.',
        priority: 1,
      },
    ],
    selectableFields: ['.spec.where', '.status.phase', '.status.offer'],
  },
  {
    ...OFFER_NAMES,
    scope: 'Cluster',
    schema: OfferSchema,
    spec: OfferSpecSchema,
    status: OfferStatusSchema,
    printerColumns: [
      readyColumn(),
      { name: 'Active', type: 'integer', jsonPath: '.status.activeLeases', description: 'Leases using the Offer.' },
      { name: 'Price/h', type: 'number', jsonPath: '.spec.pricePerHour', description: 'US dollars per hour.' },
      { name: 'Idle-Timeout', type: 'string', jsonPath: '.spec.idleTimeout', description: 'Idle time before release.' },
      { name: 'Max-Lifetime', type: 'string', jsonPath: '.spec.maxLifetime', description: 'Longest a lease lasts.' },
      age,
      {
        name: 'GPU',
        type: 'string',
        jsonPath: '.spec.command.shape.gpu',
        description: 'GPU model of a command Offer.',
        priority: 1,
      },
      {
        name: 'Max-Price/h',
        type: 'number',
        jsonPath: '.spec.lambda.maxPricePerHour',
        description: 'Price cap of a Lambda Offer.',
        priority: 1,
      },
      {
        name: 'Listed',
        type: 'date',
        jsonPath: '.status.lastListTime',
        description: 'Last successful listing.',
        priority: 1,
      },
    ],
  },
  {
    ...PEERFLEET_NAMES,
    scope: 'Namespaced',
    schema: PeerFleetSchema,
    spec: PeerFleetSpecSchema,
    status: PeerFleetStatusSchema,
    printerColumns: [
      { name: 'Origin', type: 'string', jsonPath: '.spec.origin', description: 'API server of the peer.' },
      { name: 'Peer-Namespace', type: 'string', jsonPath: '.spec.namespace', description: 'Namespace of the peer queue.' },
      { name: 'Ready', type: 'boolean', jsonPath: '.status.verdict.ready', description: 'Whether lending can start.' },
      { name: 'Listed', type: 'boolean', jsonPath: '.spec.listed', description: 'Whether our nodes are offered.' },
      { name: 'Hosts', type: 'string', jsonPath: '.status.summary', description: 'Lendable nodes by state.' },
      { name: 'Price/GPU-h', type: 'number', jsonPath: '.spec.pricePerGPUHour', description: 'US dollars per GPU-hour.' },
      { name: 'Earned', type: 'number', jsonPath: '.status.accounting.amountUSD', description: 'US dollars earned.' },
      age,
      { name: 'Verdict', type: 'string', jsonPath: '.status.verdict.code', description: 'Readiness verdict.', priority: 1 },
      { name: 'Ledger-Earned', type: 'number', jsonPath: '.status.accounting.ledger.amountUSD', description: 'US dollars earned by our own ledger.', priority: 1 },
      { name: 'Mismatched', type: 'integer', jsonPath: '.status.accounting.mismatched', description: 'Peer Jobs whose record differs from our ledger.', priority: 1 },
    ],
  },
  {
    ...RUNNERTARGET_NAMES,
    scope: 'Namespaced',
    schema: RunnerTargetSchema,
    spec: RunnerTargetSpecSchema,
    status: RunnerTargetStatusSchema,
    printerColumns: [
      { name: 'Org', type: 'string', jsonPath: '.spec.github.org', description: 'GitHub organization.' },
      { name: 'Hosts', type: 'integer', jsonPath: '.status.counts.hosts', description: 'Hosts the pool has.' },
      { name: 'Busy', type: 'integer', jsonPath: '.status.counts.busy', description: 'Hosts running a job.' },
      { name: 'Queued', type: 'integer', jsonPath: '.status.counts.queued', description: 'Queued jobs the runners could take.' },
      { name: 'Spend', type: 'number', jsonPath: '.status.spendTodayUSD', description: 'US dollars spent today (UTC).' },
      { name: 'Budget', type: 'number', jsonPath: '.spec.dailyBudgetUSD', description: 'US dollars per day.' },
      { name: 'Last-Check', type: 'date', jsonPath: '.status.lastCheckAt', description: 'When the last check finished.' },
      age,
      { name: 'Floor', type: 'integer', jsonPath: '.spec.floor', description: 'Hosts always kept.', priority: 1 },
      { name: 'Max', type: 'integer', jsonPath: '.spec.maxHosts', description: 'Most hosts at once.', priority: 1 },
      { name: 'Desired', type: 'integer', jsonPath: '.status.plan.desired', description: 'Hosts the last check wanted.', priority: 1 },
      { name: 'Project', type: 'string', jsonPath: '.spec.gce.project', description: 'GCE project.', priority: 1 },
      readyColumn(1),
      {
        name: 'Durable',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Durable")].status',
        description: 'Whether status writes succeed; False stops provider calls.',
        priority: 1,
      },
    ],
  },
];

// ---------------------------------------------------------------------------
// JSON Schema -> structural schema

/** Keywords apiextensions.k8s.io/v1 accepts and that pass through unchanged. */
