import { describe, expect, it } from '@jest/globals';
import { FlagError, parseControllerFlags } from './flags.js';

describe('parseControllerFlags', () => {
  it('defaults, with the chart-set environment taken into account', () => {
    const f = parseControllerFlags([], { POD_NAMESPACE: 'leasehold-system', LEASEHOLD_MAX_LEASES: '5' });
    expect(f).toMatchObject({
      metricsAddr: ':8080',
      leaderElection: { namespace: 'leasehold-system', name: 'leasehold-controller' },
      concurrency: 4,
      maxLeases: 5,
      maxLeasesPerNamespace: 0,
      acquireTimeoutMs: 15 * 60_000,
      checkIntervalMs: 60_000,
      namespace: 'leasehold-system',
      watchNamespace: undefined,
      orphans: 'report',
      lambdaLaunchSettleMs: 120_000,
      historyLimit: 32,
      historyMaxAgeMs: 168 * 3600_000,
      shutdownGraceMs: 25_000,
      peerLending: true,
      runnerSampleWindowScale: 1,
      runnerSSHUser: 'leasehold',
      runnerSSHPort: 22,
      runnerGceOwnIdentity: false,
      runnerBusyLagMs: 60_000,
      runnerBootGraceMs: 45 * 60_000,
      runnerOfflineGraceMs: 5 * 60_000,
      runnerFollowUpMs: 10_000,
      runnerCheckLeaseMs: 30_000,
    });
  });

  it('--runner-gce-own-identity lets RunnerTargets without credentials use the controller identity', () => {
    expect(parseControllerFlags(['--runner-gce-own-identity'], {}).runnerGceOwnIdentity).toBe(true);
  });

  it('--max-leases-per-namespace caps the active Leases of each namespace', () => {
    expect(parseControllerFlags(['--max-leases-per-namespace', '3'], {}).maxLeasesPerNamespace).toBe(3);
  });

  it('--installation-secret names the release\'s installation ID Secret; the chart sets it per release', () => {
    expect(parseControllerFlags([], {}).installationSecret).toBe('leasehold-installation');
    expect(parseControllerFlags([], { LEASEHOLD_INSTALLATION_SECRET: 'prod-leasehold-installation' }).installationSecret).toBe('prod-leasehold-installation');
    expect(() => parseControllerFlags(['--installation-secret', 'Bad_Name'], {})).toThrow(FlagError);
  });

  it('--namespace-lease-limits takes the admin caps per namespace from the chart, and refuses a malformed one naming the value', () => {
    expect(parseControllerFlags([], { LEASEHOLD_NAMESPACE_LEASE_LIMITS: '{"perNamespace":{"maxLeases":1},"namespaces":{}}' }).namespaceLeaseLimits).toEqual({ perNamespace: { maxLeases: 1 }, namespaces: {} });
    expect(parseControllerFlags([], {}).namespaceLeaseLimits).toEqual({});
    expect(() => parseControllerFlags(['--namespace-lease-limits', '{"perNamespace":{"maxPricePerHour":-2}}'], {})).toThrow(/--namespace-lease-limits: leaseLimits\.perNamespace\.maxPricePerHour/);
  });

  it('--runner-check-interval-scale scales RunnerTarget check intervals', () => {
    expect(parseControllerFlags([], {}).runnerCheckIntervalScale).toBe(1);
    expect(parseControllerFlags(['--runner-check-interval-scale', '0.1'], {}).runnerCheckIntervalScale).toBe(0.1);
  });

  it('--runner-lifetime-scale scales how the controller reads spec.gce.maxRunDuration', () => {
    expect(parseControllerFlags([], {}).runnerLifetimeScale).toBe(1);
    expect(parseControllerFlags(['--runner-lifetime-scale', '0.01'], {}).runnerLifetimeScale).toBe(0.01);
  });

  it('--runner-sample-window-scale scales the RunnerTarget sample window', () => {
    expect(parseControllerFlags(['--runner-sample-window-scale', '0.01'], {}).runnerSampleWindowScale).toBe(0.01);
  });

  it('--runner-ssh-user and --runner-ssh-port say how hosts are reached', () => {
    expect(parseControllerFlags(['--runner-ssh-user', 'ci', '--runner-ssh-port', '2222'], {})).toMatchObject({ runnerSSHUser: 'ci', runnerSSHPort: 2222 });
  });

  it('--github-webhook-port: off (0) by default; a port of its own, refused when it is the metrics port or out of range', () => {
    expect(parseControllerFlags([], {}).githubWebhookPort).toBe(0);
    expect(parseControllerFlags(['--github-webhook-port', '9443'], {}).githubWebhookPort).toBe(9443);
    expect(() => parseControllerFlags(['--github-webhook-port', '8080'], {})).toThrow(/--github-webhook-port 8080 is the port of --metrics-addr :8080/);
    expect(() => parseControllerFlags(['--github-webhook-port', '70000'], {})).toThrow(/from 0 \(off\) to 65535/);
    expect(() => parseControllerFlags(['--github-webhook-port', 'on'], {})).toThrow(FlagError);
  });

  it('--runner-check-concurrency sets how many RunnerTarget checks run at once, at least 1', () => {
    expect(parseControllerFlags([], {}).runnerCheckConcurrency).toBe(4);
    expect(parseControllerFlags(['--runner-check-concurrency', '9'], {}).runnerCheckConcurrency).toBe(9);
    expect(() => parseControllerFlags(['--runner-check-concurrency', '0'], {})).toThrow(FlagError);
  });

  it('--concurrency, --offer-concurrency, --peerfleet-concurrency and --runnertarget-concurrency set each kind\'s reconcile workers, at least 1', () => {
    expect(parseControllerFlags([], {})).toMatchObject({ concurrency: 4, offerConcurrency: 1, peerFleetConcurrency: 2, runnerTargetConcurrency: 4 });
    const f = parseControllerFlags(['--concurrency', '8', '--offer-concurrency', '2', '--peerfleet-concurrency', '3', '--runnertarget-concurrency', '6'], {});
    expect(f).toMatchObject({ concurrency: 8, offerConcurrency: 2, peerFleetConcurrency: 3, runnerTargetConcurrency: 6 });
  });

  it('--peerfleet-concurrency and --peerfleet-effect-concurrency set the PeerFleet workers and effects at once, at least 1', () => {
    expect(parseControllerFlags([], {})).toMatchObject({ peerFleetConcurrency: 2, peerFleetEffectConcurrency: 4 });
    expect(parseControllerFlags(['--peerfleet-concurrency', '3', '--peerfleet-effect-concurrency', '16'], {})).toMatchObject({ peerFleetConcurrency: 3, peerFleetEffectConcurrency: 16 });
    expect(() => parseControllerFlags(['--peerfleet-concurrency', '0'], {})).toThrow(FlagError);
    expect(() => parseControllerFlags(['--peerfleet-effect-concurrency', '0'], {})).toThrow(FlagError);
  });

  it('--runner-busy-flag-lag, --runner-boot-grace, --runner-offline-grace, --runner-follow-up and --runner-check-lease set the RunnerTarget times', () => {
    const f = parseControllerFlags(['--runner-busy-flag-lag', '5s', '--runner-boot-grace', '20s', '--runner-offline-grace', '8s', '--runner-follow-up', '1s', '--runner-check-lease', '6s'], {});
    expect(f).toMatchObject({ runnerBusyLagMs: 5000, runnerBootGraceMs: 20_000, runnerOfflineGraceMs: 8000, runnerFollowUpMs: 1000, runnerCheckLeaseMs: 6000 });
  });

  it('PeerFleet admin bounds: no origin, no toleration and any registry by default; set by flag or by the chart environment', () => {
    expect(parseControllerFlags([], {})).toMatchObject({ allowedPeerOrigins: [], peerTolerateTaints: [], peerAllowedRegistries: [] });
    const f = parseControllerFlags(['--allowed-peer-origins', 'https://peer.example.com:6443', '--peer-tolerate-taints', 'nvidia.com/gpu:NoSchedule,maint:NoExecute:600', '--peer-allowed-registries', 'registry.example.com, ghcr.io/team'], {});
    expect(f.allowedPeerOrigins).toEqual(['https://peer.example.com:6443']);
    expect(f.peerTolerateTaints).toEqual([{ key: 'nvidia.com/gpu', effect: 'NoSchedule' }, { key: 'maint', effect: 'NoExecute', tolerationSeconds: 600 }]);
    expect(f.peerAllowedRegistries).toEqual(['registry.example.com', 'ghcr.io/team']);
    const env = parseControllerFlags([], { LEASEHOLD_PEER_TOLERATE_TAINTS: 'gpu:NoSchedule', LEASEHOLD_PEER_ALLOWED_REGISTRIES: 'registry.example.com' });
    expect(env).toMatchObject({ peerTolerateTaints: [{ key: 'gpu', effect: 'NoSchedule' }], peerAllowedRegistries: ['registry.example.com'] });
  });

  it('--peer-budget-bytes, --peer-budget-objects, --peer-budget-retry and --max-peerfleets-per-namespace bound what the peers of PeerFleets may make us hold', () => {
    expect(parseControllerFlags([], {})).toMatchObject({ peerBudget: { bytes: 32 * 1024 ** 2, objects: 5000, retryMs: 600_000 }, maxPeerFleetsPerNamespace: 4 });
    const f = parseControllerFlags(['--peer-budget-bytes', '1Gi', '--peer-budget-objects', '200', '--peer-budget-retry', '30s', '--max-peerfleets-per-namespace', '0'], {});
    expect(f).toMatchObject({ peerBudget: { bytes: 1024 ** 3, objects: 200, retryMs: 30_000 }, maxPeerFleetsPerNamespace: 0 });
    expect(parseControllerFlags(['--peer-budget-bytes', '2097152'], {}).peerBudget.bytes).toBe(2 * 1024 ** 2);
    expect(() => parseControllerFlags(['--peer-budget-bytes', '512Ki'], {})).toThrow(/^--peer-budget-bytes 512Ki must be a size of at least 1Mi, in bytes or with Ki, Mi or Gi \(e.g. 32Mi\)$/);
    expect(() => parseControllerFlags(['--peer-budget-bytes', '32MB'], {})).toThrow(FlagError);
    expect(() => parseControllerFlags(['--peer-budget-objects', '0'], {})).toThrow(FlagError);
    expect(() => parseControllerFlags(['--max-peerfleets-per-namespace=-1'], {})).toThrow(FlagError);
  });

  it('--no-leader-elect turns leader election off', () => {
    expect(parseControllerFlags(['--no-leader-elect'], {}).leaderElection).toBeUndefined();
  });

  it.each([
    [['--concurrency', '0'], /--concurrency 0 must be a whole number of at least 1/],
    [['--offer-concurrency', '0'], /^--offer-concurrency 0 must be a whole number of at least 1$/],
    [['--offer-concurrency', 'one'], /^--offer-concurrency one must be a whole number of at least 1$/],
    [['--runnertarget-concurrency', '1.5'], /^--runnertarget-concurrency 1.5 must be a whole number of at least 1$/],
    [['--runnertarget-concurrency', '0'], /^--runnertarget-concurrency 0 must be a whole number of at least 1$/],
    [['--peerfleet-concurrency=-1'], /^--peerfleet-concurrency -1 must be a whole number of at least 1$/],
    [['--max-leases=-1'], /--max-leases -1 must be a whole number/],
    [['--max-leases-per-namespace', 'two'], /--max-leases-per-namespace two must be a whole number \(0: no limit per namespace\)/],
    [['--history-limit', '2.5'], /--history-limit 2.5 must be a whole number/],
    [['--acquire-timeout', 'soon'], /^--acquire-timeout: /],
    [['--orphans', 'delete'], /--orphans delete must be terminate or report/],
    [['--runner-sample-window-scale', '0'], /--runner-sample-window-scale 0 must be a positive number/],
    [['--runner-check-interval-scale', '0'], /--runner-check-interval-scale 0 must be a positive number/],
    [['--runner-lifetime-scale', '0'], /--runner-lifetime-scale 0 must be a positive number/],
    [['--runner-sample-window-scale', 'fast'], /--runner-sample-window-scale fast must be a positive number/],
    [['--runner-ssh-port', '0'], /--runner-ssh-port 0 must be a whole number from 1 to 65535/],
    [['--runner-ssh-port', '70000'], /--runner-ssh-port 70000 must be a whole number from 1 to 65535/],
    [['--runner-ssh-user', 'Root User'], /--runner-ssh-user Root User must be a Unix user name/],
    [['--runner-follow-up', '0'], /--runner-follow-up 0 must be a duration above 0/],
    [['--runner-check-lease', '0s'], /--runner-check-lease 0s must be a duration above 0/],
    [['--runner-boot-grace', 'long'], /^--runner-boot-grace: /],
    [['--runner-offline-grace', 'soon'], /^--runner-offline-grace: /],
    [['--peer-tolerate-taints', 'maint:NoExecute'], /--peer-tolerate-taints: maint:NoExecute must be key:NoSchedule or key:NoExecute:<seconds>/],
    [['--peer-allowed-registries', 'https://registry.example.com'], /--peer-allowed-registries: https:\/\/registry.example.com must be a registry host/],
  ])('%j is refused naming the flag', (args, message) => {
    expect(() => parseControllerFlags(args, {})).toThrow(FlagError);
    expect(() => parseControllerFlags(args, {})).toThrow(message);
  });

  it('refuses an unknown flag', () => {
    expect(() => parseControllerFlags(['--leader-elect-please'], {})).toThrow(/Unknown option/);
  });
});
