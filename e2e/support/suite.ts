// One Lease e2e file's setup and teardown: the fixture in a fresh namespace,
// the controller started on it with the flags every Lease file shares, and
// after each test the check that none of this file's sshd machines is left
// running (a machine nobody released is the bug that costs money).
import { afterAll, afterEach, beforeAll, expect } from '@jest/globals';
import type { ControllerProcess } from './controller.js';
import { leaseFixture, type LeaseFixture } from './leases.js';

export interface LeaseSuiteOptions {
  /** false for a file whose tests start their own controllers (fixture.startController), with flags of their own; default true. */
  startController?: boolean;
  /** --check-interval; default 1s. */
  checkInterval?: string;
  /** --acquire-timeout; default 60s. */
  acquireTimeout?: string;
  /** --max-leases; default 2. */
  maxLeases?: number;
  /** Controller flags after the common ones. */
  controllerArgs?: string[];
  /** Runs first in beforeAll, before the fixture is made (a file's own control plane, TLS material). */
  before?: () => Promise<void> | void;
  /** Runs last in afterAll, after the controller stopped and the fixture was cleaned up. */
  after?: () => Promise<void> | void;
  /** beforeAll's timeout, for a `before` that starts something slow; jest's default otherwise. */
  setupTimeoutMs?: number;
  /** Leave out the after-each sshd check, for a file whose tests end with a Lease still Ready (cleanup stops its sshd). */
  machinesOutliveTests?: boolean;
}

export interface LeaseSuite extends LeaseFixture {
  /** The controller process started for this file (none when startController is false). */
  controller: ControllerProcess;
}

/**
 * Registers the file's beforeAll, afterEach and afterAll, and returns the
 * suite: empty until beforeAll has run, complete in every test and hook
 * after it.
 */
export function leaseSuite(prefix: string, opts: LeaseSuiteOptions = {}): LeaseSuite {
  // Test files name the suite at module scope, before jest runs beforeAll: it is filled in place.
  const suite = {} as LeaseSuite;
  beforeAll(async () => {
    await opts.before?.();
    Object.assign(suite, await leaseFixture(prefix));
    if (opts.startController === false) return;
    suite.controller = await suite.startController([
      '--check-interval', opts.checkInterval ?? '1s',
      '--acquire-timeout', opts.acquireTimeout ?? '60s',
      '--max-leases', String(opts.maxLeases ?? 2),
      ...(opts.controllerArgs ?? []),
    ]);
  }, opts.setupTimeoutMs);

  afterEach(() => {
    // Without a fixture beforeAll failed, and jest reports that instead.
    if (suite.sshdLeft && !opts.machinesOutliveTests) expect(suite.sshdLeft()).toBe('');
  });

  afterAll(async () => {
    await suite.controller?.stop();
    await suite.cleanup?.();
    await opts.after?.();
  });
  return suite;
}
