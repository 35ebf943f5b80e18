// The pinned Lambda API description read as a contract, without the emulator:
// operations found by concrete path, request bodies and answers checked per
// status, $refs followed inside the file, and unnamed fields refused.
import { describe, it, expect } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { DESCRIPTION_FILE, LambdaContract, lambdaContract } from './contract.js';

const contract = lambdaContract();
const launch = contract.operation('POST', '/api/v1/instance-operations/launch')!;
const getInstance = contract.operation('GET', '/api/v1/instances/0920582c7ff041399e34823a0be62549')!;

const instance = {
  id: '0920582c7ff041399e34823a0be62549',
  status: 'active',
  ssh_key_names: ['my-key'],
  file_system_names: [],
  region: { name: 'us-west-1', description: 'California, USA' },
  instance_type: { name: 'gpu_1x_a10', description: '1x A10 (24 GB PCIe)', gpu_description: 'A10 (24 GB PCIe)', price_cents_per_hour: 75, specs: { vcpus: 30, memory_gib: 200, storage_gib: 1400, gpus: 1 } },
  actions: { migrate: { available: true }, rebuild: { available: true }, restart: { available: true }, cold_reboot: { available: true }, terminate: { available: true } },
};

describe('the pinned Lambda API description', () => {
  it('is the file its name says, and the version the README names', () => {
    expect(contract.version).toBe('1.10.0');
    expect(DESCRIPTION_FILE).toBe(`lambda-cloud-api-${contract.version}.json`);
    expect(readFileSync(new URL('./spec/README.md', import.meta.url), 'utf8')).toContain(DESCRIPTION_FILE);
  });

  it('finds operations by method and concrete path, a literal path before a template', () => {
    expect(launch.operationId).toBe('launchInstance');
    expect(getInstance).toMatchObject({ operationId: 'getInstance', path: '/api/v1/instances/{id}', takesBody: false });
    expect(contract.operation('GET', '/api/v1/firewall-rulesets/global')!.operationId).toBe('getGlobalFirewallRuleset');
    expect(contract.operation('DELETE', '/api/v1/ssh-keys/abc')!.operationId).toBe('deleteSSHKey');
    expect(contract.operation('GET', '/api/v1/nothing')).toBeUndefined();
    expect(contract.operation('PUT', '/api/v1/instances')).toBeUndefined();
  });

  it('takes the launch body the description documents, and nothing it does not name', () => {
    expect(launch.checkRequest({ region_name: 'us-west-1', instance_type_name: 'gpu_1x_a10', ssh_key_names: ['my-key'], file_system_names: [], name: 'n', image: { family: 'lambda-stack-22-04' }, user_data: '#cloud-config\n' })).toEqual([]);
    expect(launch.checkRequest({ region_name: 'us-west-1', instance_type_name: 'gpu_1x_a10', ssh_key_names: ['my-key'], quantity: 1 })).toEqual(['quantity is not a field the API describes']);
    expect(launch.checkRequest({ region_name: 'us-west-1', ssh_key_names: 'my-key' })).toEqual(expect.arrayContaining(["the body must have required property 'instance_type_name'", 'ssh_key_names must be array']));
    // Through $refs: image is anyOf {id} | {family}, each closed.
    expect(launch.checkRequest({ region_name: 'r', instance_type_name: 't', ssh_key_names: ['k'], image: { id: 'x', family: 'y' } })).not.toEqual([]);
    expect(launch.checkRequest(undefined)).toEqual(['the request body is missing']);
    expect(getInstance.checkRequest({})).toEqual(['this operation takes no request body']);
  });

  it('checks answers per status, following $refs, and has no schema for a status it does not describe', () => {
    expect(getInstance.checkAnswer(200, { data: instance })).toEqual([]);
    expect(getInstance.checkAnswer(200, { data: { ...instance, is_reserved: false } })).toEqual(['data.is_reserved is not a field the API describes']);
    expect(getInstance.checkAnswer(200, { data: { ...instance, status: 'sleeping' } })).toEqual(['data.status must be equal to one of the allowed values']);
    expect(getInstance.checkAnswer(404, { error: { code: 'global/object-does-not-exist', message: 'Specified instance does not exist.' } })).toEqual([]);
    expect(getInstance.checkAnswer(404, { error: { code: 'global/not-found', message: 'x' } })).toEqual(['error.code must be "global/object-does-not-exist"']);
    // The launch's own 404 needs a suggestion.
    expect(launch.checkAnswer(404, { error: { code: 'global/object-does-not-exist', message: 'File system "x" does not exist.' } })).toEqual(["error must have required property 'suggestion'"]);
    expect(launch.checkAnswer(429, { error: { code: 'global/rate-limited', message: 'x' } })).toBeUndefined();
    expect(launch.checkAnswer(500, {})).toBeUndefined();
  });

  it('refuses a schema with a keyword it does not know, when it is first used', () => {
    const bad = JSON.parse(readFileSync(new URL(`./spec/${DESCRIPTION_FILE}`, import.meta.url), 'utf8'));
    bad.paths['/api/v1/instances'].get.responses['200'].content['application/json'].schema.discriminator = { propertyName: 'kind' };
    const strict = new LambdaContract(bad);
    expect(() => strict.operation('GET', '/api/v1/instances')!.checkAnswer(200, { data: [] })).toThrow(/unknown keyword: "discriminator"/);
  });
});
