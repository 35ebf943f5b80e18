import { describe, it, expect } from '@jest/globals';
import { Registry } from 'prom-client';
import { LeaseMetrics } from './metrics.js';

describe('lease metrics', () => {
  it('counts Leases by phase and Offer and sums the spend rate of active ones at scrape time', async () => {
    const leases = [
      { status: { phase: 'Ready', offer: 'lambda', pricePerHour: 1.29 } },
      { status: { phase: 'Idle', offer: 'lambda', pricePerHour: 0.75 } },
      { status: { phase: 'Released', offer: 'lambda', pricePerHour: 9 } },
      { status: { phase: 'Launching', offer: 'box' } },
      {},
    ];
    const registry = new Registry();
    new LeaseMetrics(registry, () => leases as never);
    const text = await registry.metrics();
    expect(text).toContain('leasehold_leases{phase="Ready",offer="lambda"} 1');
    expect(text).toContain('leasehold_leases{phase="Released",offer="lambda"} 1');
    expect(text).toContain('leasehold_leases{phase="Pending",offer=""} 1');
    expect(text).toContain('leasehold_spend_rate_dollars_per_hour{offer="lambda"} 2.04');
    expect(text).toContain('leasehold_spend_rate_dollars_per_hour{offer="box"} 0');
    // A phase that empties disappears rather than keeping its last count.
    leases.splice(0, 1);
    const after = await registry.metrics();
    expect(after).not.toContain('leasehold_leases{phase="Ready",offer="lambda"}');
    expect(after).toContain('leasehold_spend_rate_dollars_per_hour{offer="lambda"} 0.75');
  });
});
