// The Lambda Cloud API v1's routes, each with the operation faults name it by.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ApiRoute } from '../kit/api.js';
import { HttpError, type Reply } from '../kit/http.js';
import { isStringArray } from './cloud-config.js';
import type { Conformance } from './conformance.js';
import type { Fleet } from './instances.js';
import { validName, type Launcher } from './launch.js';
import { hex, type CloudState } from './state.js';
import type { AccountState, ApiOp, InstanceState, LaunchRecord, SshKey } from './types.js';

const execFileP = promisify(execFile);

export type LambdaRoute = ApiRoute<ApiOp, AccountState, LaunchRecord | undefined>;

const ok = (data: unknown): Reply => ({ status: 200, body: { data } });

function looksLikePublicKey(key: string): boolean {
  const parts = key.trim().split(/\s+/);
  return parts.length >= 2 && /^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)$/.test(parts[0]!) && /^[A-Za-z0-9+/]+={0,2}$/.test(parts[1]!) && !key.includes('\n');
}

const noInstance = (id: string) => new HttpError(404, 'global/object-does-not-exist', `Instance ${id} does not exist.`);

export function lambdaRoutes(cloud: CloudState, fleet: Fleet, launcher: Launcher, root: string, conformance: Conformance): LambdaRoute[] {
  // The account's instances named in {instance_ids}; any unknown one is a 404.
  const named = (account: AccountState, body: unknown): InstanceState[] => {
    const b = (body ?? {}) as Record<string, unknown>;
    if (!isStringArray(b.instance_ids) || b.instance_ids.length === 0) throw new HttpError(400, 'global/invalid-parameters', 'instance_ids must list at least one instance ID.');
    return b.instance_ids.map((id) => {
      const i = fleet.find(account, id);
      if (!i) throw noInstance(id);
      return i;
    });
  };

  const addSshKey = async (account: AccountState, body: unknown): Promise<Reply> => {
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    if (!validName(b.name)) throw new HttpError(400, 'global/invalid-parameters', 'name must be 1 to 64 characters.');
    if (account.sshKeys.some((k) => k.name === b.name)) throw new HttpError(400, 'global/invalid-parameters', `An SSH key named "${b.name}" already exists.`, 'Choose another name.');
    let privateKey: string | undefined;
    let publicKey: string;
    if (b.public_key === undefined || b.public_key === null) {
      const dir = mkdtempSync(join(root, '.keygen-'));
      try {
        await execFileP('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', b.name, '-f', join(dir, 'key')]);
        privateKey = readFileSync(join(dir, 'key'), 'utf8');
        publicKey = readFileSync(join(dir, 'key.pub'), 'utf8').trim();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } else {
      if (typeof b.public_key !== 'string' || b.public_key.length > 4096 || !looksLikePublicKey(b.public_key)) throw new HttpError(400, 'global/invalid-parameters', 'public_key is not an OpenSSH public key.');
      publicKey = b.public_key.trim();
    }
    const key: SshKey = { id: hex(), name: b.name, public_key: publicKey };
    account.sshKeys.push(key);
    return ok(privateKey === undefined ? { ...key } : { ...key, private_key: privateKey });
  };

  // A body the API description does not allow is refused before the route
  // looks at it. The launch checks its own, after its rate limit.
  const checked = (route: LambdaRoute): LambdaRoute =>
    route.op === 'launch'
      ? route
      : {
          ...route,
          answer: (call) => {
            const refused = conformance.refusal(route.method, route.path, call.caller, call.body);
            if (refused) throw refused;
            return route.answer(call);
          },
        };

  const routes: LambdaRoute[] = [
    { method: 'GET', path: '/instance-types', op: 'list-types', answer: () => ok(cloud.instanceTypes()) },
    { method: 'GET', path: '/instances', op: 'list-instances', answer: ({ caller }) => ok(fleet.visible(caller).map((i) => fleet.apiView(i))) },
    {
      method: 'GET',
      path: '/instances/:id',
      op: 'get-instance',
      answer: ({ caller, params }) => {
        const i = fleet.find(caller, params.id!);
        if (!i) throw noInstance(params.id!);
        return ok(fleet.apiView(i));
      },
    },
    { method: 'POST', path: '/instance-operations/launch', op: 'launch', answer: ({ caller, body, trace }) => launcher.launch(caller, body, trace!) },
    {
      method: 'POST',
      path: '/instance-operations/terminate',
      op: 'terminate',
      answer: ({ caller, body }) => {
        const found = named(caller, body);
        found.forEach((i) => fleet.terminate(i));
        return ok({ terminated_instances: found.map((i) => fleet.apiView(i)) });
      },
    },
    {
      method: 'POST',
      path: '/instance-operations/restart',
      op: 'restart',
      answer: ({ caller, body }) => {
        const found = named(caller, body);
        const bad = found.find((i) => i.status !== 'active');
        if (bad) throw new HttpError(400, 'global/invalid-parameters', `Instance ${bad.id} is ${bad.status}; only active instances can be restarted.`);
        found.forEach((i) => fleet.restart(i));
        return ok({ restarted_instances: found.map((i) => fleet.apiView(i)) });
      },
    },
    { method: 'GET', path: '/ssh-keys', op: 'ssh-keys', answer: ({ caller }) => ok(caller.sshKeys.map((k) => ({ ...k }))) },
    { method: 'POST', path: '/ssh-keys', op: 'ssh-keys', answer: ({ caller, body }) => addSshKey(caller, body) },
    {
      method: 'DELETE',
      path: '/ssh-keys/:id',
      op: 'ssh-keys',
      answer: ({ caller, params }) => {
        const at = caller.sshKeys.findIndex((k) => k.id === params.id);
        // Lambda answers an unknown key ID as a bad parameter, not as a missing object.
        if (at < 0) throw new HttpError(400, 'global/invalid-parameters', `SSH key ${params.id} does not exist.`);
        caller.sshKeys.splice(at, 1);
        return ok({});
      },
    },
    {
      method: 'GET',
      path: '/file-systems',
      op: 'file-systems',
      answer: ({ caller }) =>
        ok(
          caller.fileSystems.map((f) => ({
            id: f.id,
            name: f.name,
            created: f.created,
            created_by: { id: caller.id, email: `${caller.id}@lambda-emulator.invalid`, status: 'active' },
            mount_point: f.mount_point,
            region: { ...f.region },
            is_in_use: fleet.fileSystemInUse(caller, f.name),
            bytes_used: 0,
          })),
        ),
    },
  ];
  return routes.map(checked);
}
