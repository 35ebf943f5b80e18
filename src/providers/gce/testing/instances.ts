// An instance spec as a RunnerTarget asks for one, for tests of the Compute
// Engine client; each test changes what it is about.
import { randomUUID } from 'node:crypto';
import type { GceInstanceSpec } from '../types.js';

export const TEST_ZONE = 'us-central1-a';

export const instanceSpec = (name: string, over: Partial<GceInstanceSpec> = {}): GceInstanceSpec => ({
  zone: TEST_ZONE,
  name,
  machineType: 'e2-standard-4',
  spot: true,
  image: 'projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64',
  serviceAccountEmail: 'runner-hosts@leasehold-test.iam.gserviceaccount.com',
  sshUser: 'leasehold',
  sshPublicKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIControllerKey leasehold',
  labels: { 'leasehold-target': 'ci', 'leasehold-installation': 'i1' },
  requestId: randomUUID(),
  ...over,
});
