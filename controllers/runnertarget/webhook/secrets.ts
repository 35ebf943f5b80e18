// The webhook secrets of RunnerTargets, read from each target's own
// namespace (never another) and kept a short while: every delivery is
// checked against them, and a flood of deliveries must not become a flood
// of Secret reads. A Secret that cannot be read is remembered as absent for
// the same while, and logged by its reference only.
import type { Logger } from 'pino';
import type { RunnerTarget } from '../../../src/api/index.js';
import { readSecretKey, type SecretDataReader } from '../../../src/kube/secrets.js';
import { errorText } from '../../../src/kube/errors.js';

export const WEBHOOK_SECRET_TTL_MS = 30_000;

export class WebhookSecrets {
  private readonly kept = new Map<string, { value: string | undefined; at: number }>();

  constructor(
    private readonly read: SecretDataReader,
    private readonly opts: { ttlMs?: number; now?: () => number; log?: Logger } = {},
  ) {}

  async secret(target: RunnerTarget): Promise<string | undefined> {
    const ref = target.spec.github.webhookSecretRef;
    if (!ref) return undefined;
    const namespace = target.metadata!.namespace!;
    const id = JSON.stringify([namespace, ref.name, ref.key ?? 'secret']);
    const now = (this.opts.now ?? Date.now)();
    const kept = this.kept.get(id);
    if (kept && now - kept.at < (this.opts.ttlMs ?? WEBHOOK_SECRET_TTL_MS)) return kept.value;
    let value: string | undefined;
    try {
      value = await readSecretKey(this.read, { name: ref.name, key: ref.key, namespace }, { field: 'spec.github.webhookSecretRef', what: 'the GitHub webhook secret', defaultKey: 'secret' });
    } catch (err) {
      this.opts.log?.warn({ target: `${namespace}/${target.metadata!.name}`, err: errorText(err).slice(0, 300) }, 'the webhook secret of a RunnerTarget could not be read; its deliveries are refused');
    }
    this.kept.set(id, { value, at: now });
    return value;
  }
}
