// The emulated cloud's world apart from instances: settings, regions, the
// catalog with its capacity, and accounts with their SSH keys and file systems.
import { randomBytes } from 'node:crypto';
import { sameSecret } from '../kit/http.js';
import { DEFAULT_CATALOG, DEFAULT_REGIONS, type Capacity, type CatalogEntry, type InstanceType, type Region } from './catalog.js';
import type { AccountState, FileSystem, LambdaEmulatorOptions } from './types.js';

export const hex = (bytes = 16) => randomBytes(bytes).toString('hex');

export function copyType(t: InstanceType): InstanceType {
  return { name: t.name, description: t.description, gpu_description: t.gpu_description, price_cents_per_hour: t.price_cents_per_hour, specs: { ...t.specs } };
}

/** The knobs a test may turn while the emulator runs. */
export interface Settings {
  bootMs: number;
  terminateMs: number;
  launchIntervalMs: number;
  requestsPerSecond: number;
  forgetTerminatedMs: number;
  instanceQuota: number;
}

export const SETTING_NAMES = ['bootMs', 'terminateMs', 'launchIntervalMs', 'requestsPerSecond', 'forgetTerminatedMs', 'instanceQuota'] as const;

export class CloudState {
  readonly settings: Settings;
  readonly regions: Region[];
  readonly accounts: AccountState[] = [];
  /** The account of the emulator's own API key. */
  readonly first: AccountState;
  private types = new Map<string, InstanceType>();
  // type -> region -> remaining (Infinity when uncounted)
  private capacity = new Map<string, Map<string, number>>();
  private accountSeq = 0;

  constructor(opts: LambdaEmulatorOptions) {
    this.settings = {
      bootMs: opts.bootMs ?? 1000,
      terminateMs: opts.terminateMs ?? 500,
      launchIntervalMs: opts.launchIntervalMs ?? 12_000,
      requestsPerSecond: opts.requestsPerSecond ?? 1,
      forgetTerminatedMs: opts.forgetTerminatedMs ?? 10_000,
      instanceQuota: opts.instanceQuota ?? Infinity,
    };
    this.regions = (opts.regions ?? DEFAULT_REGIONS).map((r) => ({ ...r }));
    this.setCatalog(opts.catalog ?? DEFAULT_CATALOG);
    this.first = this.addAccount(opts.apiKey);
    for (const k of opts.extraApiKeys ?? []) this.addAccount(k);
    for (const f of opts.fileSystems ?? []) this.addFileSystem(f.name, f.region);
  }

  /** The settings as JSON shows them (no Infinity). */
  settingsView() {
    return { ...this.settings, instanceQuota: Number.isFinite(this.settings.instanceQuota) ? this.settings.instanceQuota : null };
  }

  regionByName(name: string): Region | undefined {
    return this.regions.find((r) => r.name === name);
  }

  type(name: string): InstanceType | undefined {
    return this.types.get(name);
  }

  setCatalog(entries: readonly CatalogEntry[]): void {
    const t = new Map<string, InstanceType>();
    const c = new Map<string, Map<string, number>>();
    for (const e of entries) {
      if (!e.name) throw new Error('setCatalog: an instance type has no name');
      t.set(e.name, copyType(e));
      c.set(e.name, this.capacityMap(e.name, e.regions));
    }
    this.types = t;
    this.capacity = c;
  }

  setCapacity(typeName: string, c: Capacity): void {
    if (!this.types.has(typeName)) throw new Error(`setCapacity: unknown instance type "${typeName}"`);
    this.capacity.set(typeName, this.capacityMap(typeName, c));
  }

  setPrice(typeName: string, cents: number): void {
    const t = this.types.get(typeName);
    if (!t) throw new Error(`setPrice: unknown instance type "${typeName}"`);
    if (!Number.isInteger(cents) || cents < 0) throw new Error('setPrice: cents must be a whole number >= 0');
    t.price_cents_per_hour = cents;
  }

  /** Each instance type with its capacity, as the handle shows it. */
  catalog(): CatalogEntry[] {
    return [...this.types.values()].map((t) => {
      const caps = this.capacity.get(t.name) ?? new Map<string, number>();
      const counted = [...caps.values()].some((n) => n !== Infinity);
      return { ...copyType(t), regions: counted ? Object.fromEntries(caps) : [...caps.keys()] };
    });
  }

  /** GET /instance-types's data. */
  instanceTypes(): Record<string, unknown> {
    const data: Record<string, unknown> = {};
    for (const t of this.types.values()) {
      const caps = this.capacity.get(t.name) ?? new Map<string, number>();
      data[t.name] = {
        instance_type: copyType(t),
        regions_with_capacity_available: this.regions.filter((r) => (caps.get(r.name) ?? 0) > 0).map((r) => ({ ...r })),
      };
    }
    return data;
  }

  /** What is left of a type in a region: Infinity when uncounted, undefined when it is not offered there. */
  capacityLeft(typeName: string, region: string): number | undefined {
    return this.capacity.get(typeName)?.get(region);
  }

  /** Takes one unit of counted capacity; returns whether it was counted (and so must be given back). */
  takeCapacity(typeName: string, region: string): boolean {
    const n = this.capacityLeft(typeName, region);
    if (n === undefined || n === Infinity) return false;
    this.capacity.get(typeName)!.set(region, n - 1);
    return true;
  }

  giveBackCapacity(typeName: string, region: string): void {
    const m = this.capacity.get(typeName);
    const n = m?.get(region);
    if (m && n !== undefined && n !== Infinity) m.set(region, n + 1);
  }

  addAccount(apiKey?: string, name?: string): AccountState {
    this.accountSeq++;
    const seq = this.accountSeq;
    const key = apiKey ?? `secret_emulator-${seq}_${hex()}.${hex()}`;
    if (this.accounts.some((a) => a.apiKey === key)) throw new Error('an account with this API key exists');
    const a: AccountState = { id: `account-${seq}`, name: name ?? `account ${seq}`, apiKey: key, sshKeys: [], fileSystems: [] };
    this.accounts.push(a);
    return a;
  }

  accountByKey(key: string): AccountState | undefined {
    return this.accounts.find((a) => sameSecret(a.apiKey, key));
  }

  /** By account ID or API key. */
  accountByRef(ref: string): AccountState | undefined {
    return this.accounts.find((a) => a.id === ref) ?? this.accountByKey(ref);
  }

  addFileSystem(name: string, region: string, ref?: string): string {
    const account = ref === undefined ? this.first : this.accountByRef(ref);
    if (!account) throw new Error('addFileSystem: no such account');
    const r = this.regionByName(region);
    if (!r) throw new Error(`addFileSystem: unknown region "${region}"`);
    if (account.fileSystems.some((f) => f.name === name)) throw new Error(`addFileSystem: ${name} exists`);
    const fs: FileSystem = { id: hex(), name, region: { ...r }, mount_point: `/lambda/nfs/${name}`, created: new Date().toISOString() };
    account.fileSystems.push(fs);
    return fs.id;
  }

  private capacityMap(typeName: string, c: Capacity | undefined): Map<string, number> {
    const m = new Map<string, number>();
    if (c === undefined) return m;
    const entries: [string, number][] = Array.isArray(c) ? (c as readonly string[]).map((r) => [r, Infinity]) : Object.entries(c as Record<string, number>);
    for (const [region, n] of entries) {
      if (!this.regionByName(region)) throw new Error(`setCapacity(${typeName}): unknown region "${region}"; regions are ${this.regions.map((r) => r.name).join(', ')}`);
      if (!(n >= 0)) throw new Error(`setCapacity(${typeName}): capacity of ${region} must be >= 0`);
      m.set(region, n);
    }
    return m;
  }
}
