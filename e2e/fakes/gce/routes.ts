// Compute Engine v1's routes the emulator serves, each with the operation
// faults name it by: instances insert/get/list/aggregatedList/delete/getGuestAttributes and
// zoneOperations get/wait. Each checks its query parameters against the pinned
// discovery document's method (contract.ts) before anything else.
import { createHash } from 'node:crypto';
import type { ApiCall, ApiRoute } from '../kit/api.js';
import { HttpError, type Reply } from '../kit/http.js';
import { Accounts, type ServiceAccount } from './auth.js';
import { COMPUTE_BASE, type Compute } from './compute.js';
import { refuseQuery, type MethodId } from './contract.js';
import { capacityReply, googleError } from './errors.js';
import { parseFilter } from './filter.js';
import { asksExternalIp, policyRefusal } from './policy.js';
import type { EmulatedInstance, GceOp, Scheduling } from './types.js';

export type Caller = ServiceAccount & { scopes: string[] };
type Route = ApiRoute<GceOp, Caller, undefined>;
type Call = ApiCall<Caller, undefined>;

const NAME = /^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const LABEL_KEY = /^[a-z][a-z0-9_-]{0,62}$/;
const LABEL_VALUE = /^[a-z0-9_-]{0,63}$/;
const MAX_RESULTS = 500;

const ok = (body: unknown): Reply => ({ status: 200, body });
const invalid = (field: string, value: unknown, why: string) => new HttpError(400, 'invalid', `Invalid value for field '${field}': '${String(value)}'. ${why}`);
const fingerprint = (v: unknown) => createHash('sha256').update(JSON.stringify(v)).digest('base64').slice(0, 12);

function obj(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

export function gceRoutes(compute: Compute): Route[] {
  const { project } = compute;
  const resource = (zone: string, kind: string, name: string) => `projects/${project}/zones/${zone}/${kind}/${name}`;
  const notFound = (what: string) => new HttpError(404, 'notFound', `The resource '${what}' was not found`);

  // Every route: the token's scopes allow Compute Engine, the project and zone exist.
  const scoped = (answer: (call: Call, zone: string) => Reply | Promise<Reply>) => (call: Call) => {
    if (!Accounts.canUseCompute(call.caller.scopes)) throw new HttpError(403, 'insufficientPermissions', 'Request had insufficient authentication scopes.');
    if (call.params.project !== project) throw notFound(`projects/${call.params.project}`);
    const zone = call.params.zone!;
    if (!compute.zones.includes(zone)) throw invalid('zone', zone, 'Unknown zone.');
    return answer(call, zone);
  };

  const instanceOf = (zone: string, name: string): EmulatedInstance => {
    const i = compute.instances.get(compute.key(zone, name));
    if (!i) throw notFound(resource(zone, 'instances', name));
    return i;
  };

  const apiInstance = (i: EmulatedInstance) => {
    const zoneLink = compute.zoneLink(i.zone);
    const up = i.status === 'RUNNING';
    return {
      kind: 'compute#instance',
      id: i.id,
      creationTimestamp: i.creationTimestamp,
      name: i.name,
      zone: zoneLink,
      machineType: `${zoneLink}/machineTypes/${i.machineType}`,
      status: i.status,
      labels: { ...i.labels },
      labelFingerprint: fingerprint(i.labels),
      metadata: { kind: 'compute#metadata', fingerprint: fingerprint(i.metadata), items: i.metadata.map((m) => ({ ...m })) },
      scheduling: { ...i.scheduling },
      serviceAccounts: i.serviceAccounts.map((s) => ({ email: s.email, scopes: [...s.scopes] })),
      networkInterfaces: [
        {
          kind: 'compute#networkInterface',
          name: 'nic0',
          network: `${zoneLink.replace(/\/zones\/.*$/, '')}/global/networks/default`,
          networkIP: i.address,
          // An external address only where the insert asked for an access config, as the API gives none by default.
          ...(up && i.external ? { accessConfigs: [{ kind: 'compute#accessConfig', type: 'ONE_TO_ONE_NAT', name: 'External NAT', natIP: i.address }] } : {}),
        },
      ],
      selfLink: `${zoneLink}/instances/${i.name}`,
    };
  };

  const requestIdOf = (call: Call): string | undefined => {
    const id = call.query.get('requestId') ?? undefined;
    if (id !== undefined && (!UUID.test(id) || /^[0-]+$/.test(id))) throw invalid('requestId', id, 'Must be a UUID other than the zero UUID.');
    return id;
  };

  const insert = (call: Call, zone: string): Reply => {
    const requestId = requestIdOf(call);
    const again = requestId ? compute.operationByRequestId(requestId) : undefined;
    if (again) return ok(compute.view(again));
    const b = obj(call.body);
    if (typeof b.name !== 'string' || !NAME.test(b.name)) throw invalid('resource.name', b.name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'");
    const mt = typeof b.machineType === 'string' ? /(?:^|\/)zones\/([^/]+)\/machineTypes\/([^/]+)$/.exec(b.machineType) : null;
    if (!mt || mt[1] !== zone) throw invalid('resource.machineType', b.machineType, `Must be zones/${zone}/machineTypes/TYPE.`);
    const machineType = mt[2]!;
    if (!compute.machineTypes.includes(machineType)) throw invalid('resource.machineType', b.machineType, `Machine type with name '${machineType}' does not exist in zone '${zone}'.`);
    const labels = obj(b.labels) as Record<string, unknown>;
    for (const [k, v] of Object.entries(labels)) {
      if (!LABEL_KEY.test(k) || typeof v !== 'string' || !LABEL_VALUE.test(v)) throw invalid(`resource.labels.${k}`, v, 'Label keys start with a lowercase letter; keys and values use lowercase letters, digits, _ and -, at most 63 characters.');
    }
    const scheduling = obj(b.scheduling) as Scheduling;
    if (scheduling.provisioningModel !== undefined && !['STANDARD', 'SPOT'].includes(scheduling.provisioningModel)) throw invalid('resource.scheduling.provisioningModel', scheduling.provisioningModel, 'Must be STANDARD or SPOT.');
    if (scheduling.instanceTerminationAction !== undefined && !['STOP', 'DELETE'].includes(scheduling.instanceTerminationAction)) throw invalid('resource.scheduling.instanceTerminationAction', scheduling.instanceTerminationAction, 'Must be STOP or DELETE.');
    if (scheduling.maxRunDuration !== undefined) {
      const seconds = Number(obj(scheduling.maxRunDuration).seconds);
      // Compute Engine's limits for a VM's run duration: 30 seconds to 120 days, and it needs a termination action.
      if (!Number.isInteger(seconds) || seconds < 30 || seconds > 120 * 86_400) throw invalid('resource.scheduling.maxRunDuration.seconds', obj(scheduling.maxRunDuration).seconds, 'Must be 30 seconds to 120 days.');
      if (scheduling.instanceTerminationAction === undefined) throw invalid('resource.scheduling.instanceTerminationAction', undefined, 'Required with maxRunDuration.');
    }
    if (compute.instances.has(compute.key(zone, b.name))) throw new HttpError(409, 'alreadyExists', `The resource '${resource(zone, 'instances', b.name)}' already exists`);
    // Policy before capacity: a request the organisation forbids is refused whatever the zone has.
    const policy = policyRefusal(compute.settings.orgPolicy, project, zone, b.name, b, call.caller.email);
    if (policy && compute.settings.orgPolicy.refuseAs === 'http') {
      compute.policyRefused(zone, b.name, machineType, scheduling.provisioningModel, policy);
      return googleError(policy.status, policy.reason, policy.message);
    }
    const refusal = policy ? undefined : compute.refusalFor(zone, b.name, machineType, scheduling.provisioningModel, 'http');
    if (refusal) return capacityReply(refusal, project, zone, machineType);
    const items = Array.isArray(obj(b.metadata).items) ? (obj(b.metadata).items as unknown[]).map(obj) : [];
    const accounts = Array.isArray(b.serviceAccounts) ? (b.serviceAccounts as unknown[]).map(obj) : [];
    const op = compute.insert(call.caller.email, {
      name: b.name,
      zone,
      machineType,
      labels: labels as Record<string, string>,
      metadata: items.map((m) => ({ key: String(m.key), value: String(m.value ?? '') })),
      scheduling,
      serviceAccounts: accounts.map((s) => ({ email: String(s.email ?? ''), scopes: Array.isArray(s.scopes) ? s.scopes.map(String) : [] })),
      body: b,
      requestId,
      external: asksExternalIp(b),
    }, policy);
    return ok(compute.view(op));
  };

  const paging = (call: Call) => {
    const match = parseFilter(call.query.get('filter') ?? '', { refuseRegexAcrossFields: compute.settings.refuseRegexAcrossFields });
    const max = Number(call.query.get('maxResults') ?? MAX_RESULTS);
    if (!Number.isInteger(max) || max < 1 || max > MAX_RESULTS) throw invalid('maxResults', call.query.get('maxResults'), `Must be 1 to ${MAX_RESULTS}.`);
    const token = call.query.get('pageToken');
    const from = token ? Number(Buffer.from(token, 'base64url').toString('utf8')) : 0;
    if (!Number.isInteger(from) || from < 0) throw invalid('pageToken', token, 'Not a page token this list gave.');
    return { match, max, from };
  };

  // instances.aggregatedList: every zone's instances under items["zones/Z"], an empty zone as a
  // NO_RESULTS_ON_PAGE warning, an unreachable zone as an UNREACHABLE warning and in unreachables.
  // The pinned document (revision 20261106) declares no returnPartialSuccess for this method, so a
  // caller has no way to ask for anything but these partial answers, which its response schema
  // (InstanceAggregatedList.unreachables, the UNREACHABLE warning code) describes. Pages run over
  // the instances of all zones.
  const aggregatedList = (call: Call): Reply => {
    if (!Accounts.canUseCompute(call.caller.scopes)) throw new HttpError(403, 'insufficientPermissions', 'Request had insufficient authentication scopes.');
    if (call.params.project !== project) throw notFound(`projects/${call.params.project}`);
    const { match, max, from } = paging(call);
    const down = compute.zones.filter((z) => compute.unreachableZones.has(z));
    const all = [...compute.instances.values()]
      .filter((i) => !compute.unreachableZones.has(i.zone) && match(i))
      .sort((a, b) => a.zone.localeCompare(b.zone) || a.name.localeCompare(b.name));
    const page = all.slice(from, from + max);
    const next = from + max < all.length ? Buffer.from(String(from + max)).toString('base64url') : undefined;
    const items: Record<string, unknown> = {};
    for (const zone of compute.zones) {
      const scope = `zones/${zone}`;
      const here = page.filter((i) => i.zone === zone);
      if (compute.unreachableZones.has(zone)) items[scope] = { warning: { code: 'UNREACHABLE', message: `Scope '${scope}' is unreachable.`, data: [{ key: 'scope', value: scope }] } };
      else if (here.length) items[scope] = { instances: here.map(apiInstance) };
      else items[scope] = { warning: { code: 'NO_RESULTS_ON_PAGE', message: `There are no results for scope '${scope}' on this page.`, data: [{ key: 'scope', value: scope }] } };
    }
    return ok({
      kind: 'compute#instanceAggregatedList',
      id: `projects/${project}/aggregated/instances`,
      items,
      ...(next ? { nextPageToken: next } : {}),
      ...(down.length ? { unreachables: down.map((z) => `zones/${z}`) } : {}),
      selfLink: `${COMPUTE_BASE}/projects/${project}/aggregated/instances`,
    });
  };

  const list = (call: Call, zone: string): Reply => {
    const { match, max, from } = paging(call);
    const all = [...compute.instances.values()].filter((i) => i.zone === zone && match(i)).sort((a, b) => a.name.localeCompare(b.name));
    const page = all.slice(from, from + max);
    const next = from + max < all.length ? Buffer.from(String(from + max)).toString('base64url') : undefined;
    return ok({
      kind: 'compute#instanceList',
      id: `projects/${project}/zones/${zone}/instances`,
      ...(page.length ? { items: page.map(apiInstance) } : {}),
      ...(next ? { nextPageToken: next } : {}),
      selfLink: `${compute.zoneLink(zone)}/instances`,
    });
  };

  const guestAttributes = (call: Call, zone: string): Reply => {
    const i = instanceOf(zone, call.params.instance!);
    const queryPath = call.query.get('queryPath') ?? '';
    const enabled = i.metadata.some((m) => m.key === 'enable-guest-attributes' && m.value.toUpperCase() === 'TRUE');
    // The guest agent writes hostkeys/ once the machine runs, and only where guest attributes are enabled.
    if (queryPath !== 'hostkeys/' || !enabled || i.status !== 'RUNNING' || i.hostKeys.length === 0) {
      throw notFound(`${resource(zone, 'instances', i.name)}/guestAttributes/${queryPath}`);
    }
    const items = i.hostKeys.map((k) => {
      const [type, blob] = k.trim().split(/\s+/);
      return { namespace: 'hostkeys', key: type!, value: blob! };
    });
    return ok({ kind: 'compute#guestAttributes', queryPath, queryValue: { items }, selfLink: `${compute.zoneLink(zone)}/instances/${i.name}/getGuestAttributes?queryPath=${encodeURIComponent(queryPath)}` });
  };

  const operationOf = (zone: string, name: string) => {
    const op = compute.operations.get(name);
    if (!op || op.zone !== compute.zoneLink(zone)) throw notFound(resource(zone, 'operations', name));
    return op;
  };

  // The query parameters first: a request the method cannot take is refused whatever else it holds.
  const declared = (method: MethodId, answer: (call: Call) => Reply | Promise<Reply>) => (call: Call) => refuseQuery(method, call.query) ?? answer(call);

  const base = '/projects/:project/zones/:zone';
  return [
    { method: 'POST', path: `${base}/instances`, op: 'insert', answer: declared('compute.instances.insert', scoped(insert)) },
    { method: 'GET', path: `${base}/instances`, op: 'list', answer: declared('compute.instances.list', scoped(list)) },
    { method: 'GET', path: '/projects/:project/aggregated/instances', op: 'aggregated-list', answer: declared('compute.instances.aggregatedList', aggregatedList) },
    { method: 'GET', path: `${base}/instances/:instance`, op: 'get', answer: declared('compute.instances.get', scoped((call, zone) => ok(apiInstance(instanceOf(zone, call.params.instance!))))) },
    {
      method: 'DELETE',
      path: `${base}/instances/:instance`,
      op: 'delete',
      answer: declared(
        'compute.instances.delete',
        scoped((call, zone) => {
          const requestId = requestIdOf(call);
          const again = requestId ? compute.operationByRequestId(requestId) : undefined;
          if (again) return ok(compute.view(again));
          return ok(compute.view(compute.delete(call.caller.email, instanceOf(zone, call.params.instance!), requestId)));
        }),
      ),
    },
    { method: 'GET', path: `${base}/instances/:instance/getGuestAttributes`, op: 'guest-attributes', answer: declared('compute.instances.getGuestAttributes', scoped(guestAttributes)) },
    { method: 'GET', path: `${base}/operations/:operation`, op: 'get-operation', answer: declared('compute.zoneOperations.get', scoped((call, zone) => ok(compute.view(operationOf(zone, call.params.operation!))))) },
    {
      method: 'POST',
      path: `${base}/operations/:operation/wait`,
      op: 'wait-operation',
      answer: declared(
        'compute.zoneOperations.wait',
        scoped(async (call, zone) => {
          const op = operationOf(zone, call.params.operation!);
          await compute.waitDone(op, compute.settings.waitMaxMs);
          return ok(compute.view(op));
        }),
      ),
    },
  ];
}
