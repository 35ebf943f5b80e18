// The leader's pod carries a label, so that a Service selecting it sends
// traffic only to the replica that can act on it (GitHub's webhook deliveries:
// GitHub does not redeliver a delivery a follower refused).
//
// A replica clears its own label before it can lead (a container restarted in
// a pod that led keeps the pod's labels), sets it once it leads, and clears it
// first thing when it stops, before the leader lease is released. A replica
// that loses leadership exits at once; its pod is not Ready until the new
// container has cleared the label, so no Service sends to it meanwhile.
import { PatchStrategy, setHeaderOptions, type CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { realClock, sleep } from './clock.js';
import { errorText, statusCode } from './errors.js';

export const LEADER_POD_LABEL = 'leasehold.dev/leader';

export interface PodRef {
  namespace: string;
  name: string;
}

/** The one call the label needs: a JSON merge patch of the pod's labels. */
export interface PodLabelClient {
  patchLabels(pod: PodRef, labels: Record<string, string | null>): Promise<void>;
}

export class KubePodLabelClient implements PodLabelClient {
  constructor(private readonly core: CoreV1Api) {}

  async patchLabels(pod: PodRef, labels: Record<string, string | null>): Promise<void> {
    await this.core.patchNamespacedPod(
      { name: pod.name, namespace: pod.namespace, body: { metadata: { labels } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

export class LeaderPodLabel {
  private readonly attempts: number;
  private readonly retryMs: number;

  constructor(
    private readonly client: PodLabelClient,
    private readonly pod: PodRef,
    private readonly log: Logger,
    opts: { attempts?: number; retryMs?: number } = {},
  ) {
    this.attempts = opts.attempts ?? 5;
    this.retryMs = opts.retryMs ?? 500;
  }

  /**
   * Sets (true) or removes (false) the label. Never throws: without the label
   * the controller still works, deliveries to a follower are refused (503)
   * and the periodic check catches up. A refusal (403: the chart's Role is
   * missing, 404: no such pod) is not retried.
   */
  async mark(leading: boolean): Promise<boolean> {
    const labels = { [LEADER_POD_LABEL]: leading ? 'true' : null };
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.patchLabels(this.pod, labels);
        return true;
      } catch (err) {
        const code = statusCode(err);
        const final = attempt >= this.attempts || code === 403 || code === 404 || code === 401;
        if (final) {
          this.log.warn({ pod: `${this.pod.namespace}/${this.pod.name}`, leading, code, err: errorText(err) }, 'could not label this pod as leader; webhook deliveries may reach a follower');
          return false;
        }
        await sleep(realClock, this.retryMs * attempt);
      }
    }
  }
}
