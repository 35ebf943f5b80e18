// The control API under /_emulator/: the handle's knobs over HTTP, for tests
// that run the emulator in another process (see README.md).
import type { ControlRoute } from '../kit/api.js';
import type { Capacity, CatalogEntry } from './catalog.js';
import { SETTING_NAMES, type CloudState } from './state.js';
import type { FaultSpec, LambdaEmulator } from './types.js';

function num(v: unknown, name: string): number {
  if (typeof v !== 'number' || !(v >= 0)) throw new Error(`${name} must be a number >= 0`);
  return v;
}

export function controlRoutes(handle: LambdaEmulator, cloud: CloudState): ControlRoute[] {
  return [
    {
      method: 'GET',
      path: '/state',
      answer: () => ({
        url: handle.url,
        apiKey: handle.apiKey,
        sshPort: handle.sshPort,
        sshUser: handle.sshUser,
        dir: handle.dir,
        settings: cloud.settingsView(),
        accounts: handle.accounts,
        regions: cloud.regions,
        catalog: handle.catalog(),
        faults: handle.faults,
      }),
    },
    { method: 'GET', path: '/accounts', answer: () => handle.accounts },
    {
      method: 'POST',
      path: '/accounts',
      answer: ({ fields }) => {
        const key = handle.addAccount(typeof fields.name === 'string' ? fields.name : undefined);
        return handle.accounts.find((a) => a.apiKey === key);
      },
    },
    { method: 'GET', path: '/instances', answer: ({ query }) => handle.instances(query.get('account') ?? undefined) },
    { method: 'GET', path: '/instances/:id', answer: ({ params }) => handle.instance(params.id!) },
    { method: 'GET', path: '/launches', answer: () => handle.launches },
    { method: 'GET', path: '/requests', answer: () => handle.requests },
    { method: 'GET', path: '/refused-requests', answer: () => handle.refusedRequests },
    { method: 'GET', path: '/contract-breaches', answer: () => handle.contractBreaches },
    { method: 'GET', path: '/catalog', answer: () => handle.catalog() },
    {
      method: 'PUT',
      path: '/catalog',
      answer: ({ body }) => {
        if (!Array.isArray(body)) throw new Error('the body must be a list of instance types');
        handle.setCatalog(body as CatalogEntry[]);
        return handle.catalog();
      },
    },
    {
      method: 'POST',
      path: '/capacity',
      answer: ({ fields }) => {
        if (typeof fields.type !== 'string') throw new Error('type is required');
        handle.setCapacity(fields.type, (fields.regions ?? []) as Capacity);
        return handle.catalog();
      },
    },
    {
      method: 'POST',
      path: '/price',
      answer: ({ fields }) => {
        if (typeof fields.type !== 'string') throw new Error('type is required');
        handle.setPrice(fields.type, num(fields.cents, 'cents'));
        return handle.catalog();
      },
    },
    {
      method: 'POST',
      path: '/faults',
      answer: ({ fields }) => {
        if (typeof fields.op !== 'string' || typeof fields.mode !== 'string') throw new Error('op and mode are required');
        return { id: handle.fault(fields as unknown as FaultSpec) };
      },
    },
    { method: 'GET', path: '/faults', answer: () => handle.faults },
    {
      method: 'DELETE',
      path: '/faults',
      answer: () => {
        handle.clearFaults();
        return {};
      },
    },
    {
      method: 'POST',
      path: '/settings',
      answer: ({ fields }) => {
        for (const k of SETTING_NAMES) {
          if (fields[k] === undefined) continue;
          cloud.settings[k] = k === 'instanceQuota' && fields[k] === null ? Infinity : num(fields[k], k);
        }
        return cloud.settingsView();
      },
    },
    {
      method: 'POST',
      path: '/file-systems',
      answer: ({ fields }) => {
        if (typeof fields.name !== 'string' || typeof fields.region !== 'string') throw new Error('name and region are required');
        return { id: handle.addFileSystem(fields.name, fields.region, typeof fields.account === 'string' ? fields.account : undefined) };
      },
    },
  ];
}
