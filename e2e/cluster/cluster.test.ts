// The real cluster parts PeerFleet runs on: our control plane with
// kube-controller-manager, kube-scheduler and kwok, and a peer control plane
// beside it, each started here (the suite's shared control plane is not touched).
import { ControlPlane } from './controlplane.js';
import { createFakeNodes, KWOK_EXIT_CODE_ANNOTATION, KWOK_RUN_FOR_ANNOTATION } from './kwok.js';
import { createPeerCredential, type PeerCredential } from './peer.js';
import { runTool } from './tool.js';
import { join } from 'node:path';

let ours: ControlPlane;
let peer: ControlPlane;

beforeAll(async () => {
  const began = Date.now();
  [ours, peer] = await Promise.all([
    ControlPlane.start({ name: 'ours', controllers: true, scheduler: true, kwok: true }),
    ControlPlane.start({ name: 'peer', controllers: true }),
  ]);
  console.log(
    `two control planes up in ${Date.now() - began} ms\n` +
      `  ours (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok): ${JSON.stringify(ours.info.startup)}\n` +
      `  peer (etcd, kube-apiserver, kube-controller-manager): ${JSON.stringify(peer.info.startup)}`,
  );
}, 300_000);

afterAll(async () => {
  await Promise.all([ours?.stop(), peer?.stop()]);
});

async function must(cp: ControlPlane, args: string[], input?: string): Promise<string> {
  const res = await cp.kubectl(args, input);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')} on ${cp.info.clusterName}: ${res.stderr}${res.stdout}`);
  return res.stdout;
}

const json = async (cp: ControlPlane, args: string[]) => JSON.parse(await must(cp, [...args, '-o', 'json']));

function gpuJob(name: string, namespace: string, opts: { annotations?: Record<string, string>; managedBy?: string } = {}) {
  return JSON.stringify({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace },
    spec: {
      backoffLimit: 0,
      ...(opts.managedBy ? { managedBy: opts.managedBy } : {}),
      template: {
        metadata: { annotations: opts.annotations ?? {} },
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'train', image: 'registry.invalid/train:1', resources: { limits: { 'nvidia.com/gpu': '1' } } }],
        },
      },
    },
  });
}

describe('our control plane with kube-controller-manager, kube-scheduler and kwok', () => {
  beforeAll(async () => {
    await createFakeNodes(ours.kubectl.bind(ours), [
      { name: 'gpu-a', gpus: 2, labels: { 'leasehold.dev/pool': 'lendable' } },
      { name: 'gpu-b', gpus: 1, labels: { 'leasehold.dev/pool': 'lendable' } },
    ]);
    await must(ours, ['create', 'namespace', 'work']);
  }, 180_000);

  it('fake Nodes carry the GPU allocatable and labels they were created with', async () => {
    const node = await json(ours, ['get', 'node', 'gpu-a']);
    expect(node.status.allocatable['nvidia.com/gpu']).toBe('2');
    expect(node.metadata.labels['leasehold.dev/pool']).toBe('lendable');
    expect(node.status.conditions.find((c: { type: string }) => c.type === 'Ready').status).toBe('True');
  });

  it('a GPU Job is scheduled onto a fake node, runs for its annotated time and completes', async () => {
    await must(ours, ['create', '-f', '-'], gpuJob('train', 'work', { annotations: { [KWOK_RUN_FOR_ANNOTATION]: '6s' } }));
    await must(ours, ['wait', '-n', 'work', '--for=condition=complete', '--timeout=180s', 'job/train']);
    const job = await json(ours, ['get', '-n', 'work', 'job/train']);
    expect(job.status.succeeded).toBe(1);
    const ranFor = Date.parse(job.status.completionTime) - Date.parse(job.status.startTime);
    expect(ranFor).toBeGreaterThanOrEqual(6000);
    const pods = await json(ours, ['get', 'pods', '-n', 'work', '-l', 'job-name=train']);
    expect(pods.items).toHaveLength(1);
    const [pod] = pods.items;
    expect(['gpu-a', 'gpu-b']).toContain(pod.spec.nodeName);
    expect(pod.status.phase).toBe('Succeeded');
    expect(pod.status.containerStatuses[0].state.terminated.exitCode).toBe(0);
  }, 240_000);

  it('a Job whose pod is annotated with an exit code fails with that code', async () => {
    await must(ours, ['create', '-f', '-'], gpuJob('crash', 'work', { annotations: { [KWOK_EXIT_CODE_ANNOTATION]: '3' } }));
    await must(ours, ['wait', '-n', 'work', '--for=condition=failed', '--timeout=180s', 'job/crash']);
    const pods = await json(ours, ['get', 'pods', '-n', 'work', '-l', 'job-name=crash']);
    expect(pods.items[0].status.phase).toBe('Failed');
    expect(pods.items[0].status.containerStatuses[0].state.terminated.exitCode).toBe(3);
  }, 240_000);

  it('a Job managed by leasehold.dev/peer-lending is left alone by the Job controller', async () => {
    await must(ours, ['create', '-f', '-'], gpuJob('lent', 'work', { managedBy: 'leasehold.dev/peer-lending' }));
    // A Job created after it completing shows the Job controller has had its turn at both.
    await must(ours, ['create', '-f', '-'], gpuJob('after-lent', 'work'));
    await must(ours, ['wait', '-n', 'work', '--for=condition=complete', '--timeout=180s', 'job/after-lent']);
    const lent = await json(ours, ['get', '-n', 'work', 'job/lent']);
    expect(lent.spec.managedBy).toBe('leasehold.dev/peer-lending');
    expect(lent.status ?? {}).toEqual({});
    const pods = await json(ours, ['get', 'pods', '-n', 'work', '-l', 'job-name=lent']);
    expect(pods.items).toHaveLength(0);
  }, 240_000);
});

describe('a peer control plane running beside ours', () => {
  let cred: PeerCredential;
  const asLender = (args: string[]) =>
    runTool(join(peer.info.binDir, 'kubectl'), ['--kubeconfig', cred.kubeconfig, ...args]);

  beforeAll(async () => {
    cred = await createPeerCredential(peer, { namespace: 'queue' });
    await must(peer, ['create', 'namespace', 'elsewhere']);
    await must(peer, ['create', '-f', '-'], gpuJob('wanted', 'queue', { managedBy: 'leasehold.dev/peer-lending' }));
  }, 120_000);

  it('is a separate cluster on its own ports and data', async () => {
    expect(peer.info.server).not.toBe(ours.info.server);
    expect(peer.info.dir).not.toBe(ours.info.dir);
    expect(await peer.get('/readyz')).toBe('ok');
    expect(await ours.get('/readyz')).toBe('ok');
    expect((await ours.kubectl(['get', 'namespace', 'queue'])).code).not.toBe(0);
  });

  it("the lender's token lists Jobs in the queue namespace and nothing else", async () => {
    const listed = await asLender(['get', 'jobs', '-n', 'queue', '-o', 'name']);
    expect(listed).toMatchObject({ code: 0, stdout: 'job.batch/wanted\n' });
    for (const args of [
      ['get', 'jobs', '-n', 'elsewhere'],
      ['get', 'pods', '-n', 'queue'],
      ['get', 'secrets', '-n', 'queue'],
      ['delete', 'job', 'wanted', '-n', 'queue'],
      ['create', 'job', 'extra', '-n', 'queue', '--image=registry.invalid/x:1'],
    ]) {
      const refused = await asLender(args);
      expect({ args, code: refused.code }).toEqual({ args, code: 1 });
      expect(refused.stderr).toMatch(/forbidden/i);
    }
    const ourServer = await runTool(join(ours.info.binDir, 'kubectl'),
      ['--kubeconfig', cred.kubeconfig, '--server', ours.info.server,
        '--certificate-authority', join(ours.info.dir, 'pki', 'ca.crt'), 'get', 'jobs', '-n', 'queue']);
    expect(ourServer.stderr).toContain('Unauthorized');
  });

  it("the lender's token writes a managed Job's status and kubectl wait sees it Complete", async () => {
    const start = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const end = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const patch = (status: object) =>
      asLender(['patch', 'job', 'wanted', '-n', 'queue', '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
    expect(await patch({ startTime: start, active: 1, ready: 1 })).toMatchObject({ code: 0 });
    const condition = (type: string) => ({ type, status: 'True', reason: 'PeerRun', message: 'ran on a lent node', lastTransitionTime: end });
    const done = await patch({
      active: 0, ready: 0, succeeded: 1, completionTime: end,
      conditions: [condition('SuccessCriteriaMet'), condition('Complete')],
    });
    expect(done).toMatchObject({ code: 0, stderr: '' });
    await must(peer, ['wait', '-n', 'queue', '--for=condition=complete', '--timeout=30s', 'job/wanted']);
    const job = await json(peer, ['get', '-n', 'queue', 'job/wanted']);
    expect(job.status).toMatchObject({ startTime: start, completionTime: end, succeeded: 1 });
  });
});
