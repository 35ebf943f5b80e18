// Every manifest in examples/ is accepted by the real API server with the
// CRDs installed (server-side dry run), so the examples cannot drift from the
// API. Namespaced ones go into a fresh namespace; nothing is created.
import { describe, it, expect, beforeAll } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { freshNamespace, testKubectl } from './support/kube.js';

const kubectl = testKubectl();
const dir = join(process.cwd(), 'examples');
const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
let ns: string;

beforeAll(async () => {
  ns = await freshNamespace(kubectl, 'examples');
});

describe('examples/', () => {
  it('has the documented examples', () => {
    expect(files).toEqual(expect.arrayContaining(['lambda-api-key-secret.yaml', 'lease-gpu.yaml', 'lease.yaml', 'offer-command.yaml', 'offer-lambda.yaml', 'runnertarget.yaml']));
  });

  it.each(files)('%s passes kubectl apply --dry-run=server', async (file) => {
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', join(dir, file)]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.not.stringMatching(/error/i) });
    const docs = parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => d.toJS());
    // One "... created (server dry run)" line per object in the file.
    expect(r.stdout.trim().split('\n')).toHaveLength(docs.length);
    expect(r.stdout).toMatch(/\(server dry run\)/);
  });

  it('ships no real secret: the Secret template holds a placeholder', () => {
    const secret = parseAllDocuments(readFileSync(join(dir, 'lambda-api-key-secret.yaml'), 'utf8'))[0]!.toJS();
    expect(secret.stringData.apiKey).toMatch(/^REPLACE-/);
    expect(secret.metadata.namespace).toBeUndefined();
  });

  it('the RunnerTarget comes with the Secrets it names, holding placeholders, and prices every tier', () => {
    const docs = parseAllDocuments(readFileSync(join(dir, 'runnertarget.yaml'), 'utf8')).map((d) => d.toJS());
    const target = docs.find((d) => d.kind === 'RunnerTarget');
    const secret = (name: string) => docs.find((d) => d.kind === 'Secret' && d.metadata.name === name);
    const refs = [
      [target.spec.github.tokenSecretRef, 'token'],
      [target.spec.gce.credentialsSecretRef, 'key.json'],
    ] as const;
    for (const [ref, defaultKey] of refs) {
      const s = secret(ref.name);
      expect(s?.metadata.namespace).toBeUndefined();
      expect(s.stringData[ref.key ?? defaultKey]).toMatch(/^REPLACE-/);
    }
    expect(target.spec.github.runnerGroup).toBe('Default');
    expect(target.spec.gce.machineTypeTiers.length).toBeGreaterThan(0);
    for (const tier of target.spec.gce.machineTypeTiers) expect(tier.pricePerHour).toBeGreaterThan(0);
  });

  it('the Lambda Offer points at the Secret template, and the GPU Lease asks for an H100', () => {
    const offer = parseAllDocuments(readFileSync(join(dir, 'offer-lambda.yaml'), 'utf8'))[0]!.toJS();
    const secret = parseAllDocuments(readFileSync(join(dir, 'lambda-api-key-secret.yaml'), 'utf8'))[0]!.toJS();
    expect(offer.spec.lambda.apiKeySecretRef.name).toBe(secret.metadata.name);
    expect(Object.keys(secret.stringData)).toContain(offer.spec.lambda.apiKeySecretRef.key);
    const gpu = parseAllDocuments(readFileSync(join(dir, 'lease-gpu.yaml'), 'utf8'))[0]!.toJS();
    expect(gpu.spec.where).toBe('gpu=h100,gpus>=1');
  });
});
