// What an informer can be told: where and how it reads, how it checks and
// transforms what it receives, how it recovers, and what it may hold.
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { HoldLimits, OverBudgetError } from './holdbudget.js';
import type { ListWatchLimits, ListWatchTransport } from './listwatch.js';
import type { DropReason } from './objectintake.js';
import type { ObjectCheck } from './objectschema.js';

export interface InformerOptions<T> {
  log?: Logger;
  /** Applied to every listed or watched object before it is stored or handed to handlers. Default stripManagedFields. */
  transform?: (object: T) => T;
  /** Each listed or watched object must pass this before the transform; one that fails is dropped. Default checkKubeObject. */
  check?: ObjectCheck;
  /** Called for each object, event or answer dropped, with why. */
  onDrop?: (reason: DropReason) => void;
  /** Called each time a handler threw or its promise rejected. */
  onHandlerError?: () => void;
  /** Pages one list may take before it is refused. Default MAX_LIST_PAGES. */
  maxListPages?: number;
  /** Re-emit every cached object as an update this often; 0 turns it off. Default 10 min. */
  resyncMs?: number;
  /** Restart a watch (or abort a list page) that has delivered nothing for this long. Default 5 min. */
  watchdogMs?: number;
  /** Backoff between restarts: `initialBackoffMs` doubling to `maxBackoffMs`, jittered ±20 %. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  pageSize?: number;
  labelSelector?: string;
  fieldSelector?: string;
  /** Called on every restart with its reason: `error`, `expired`, `closed` or `watchdog`. */
  onRestart?: (reason: RestartReason) => void;
  clock?: Clock;
  /** Replaces the HTTP transport built from the KubeConfig (tests). */
  transport?: ListWatchTransport<T>;
  /** Size limits on one answer, for the HTTP transport built from the KubeConfig. */
  limits?: Partial<ListWatchLimits>;
  /**
   * What the informer may hold at once (cache plus a list in progress). Past
   * it the informer is cut off: it stops for good, drops its cache and calls
   * onOverBudget. For another party's API server; none by default.
   */
  budget?: HoldLimits;
  onOverBudget?: (err: OverBudgetError) => void;
}

export type RestartReason = 'error' | 'expired' | 'closed' | 'watchdog';
