import { describe, it, expect } from '@jest/globals';
import { offerStatus } from './reconciler.js';

const offer = (spec: object) => ({ apiVersion: 'leasehold.dev/v1alpha1', kind: 'Offer', metadata: { name: 'box', generation: 3 }, spec }) as never;
const lease = (offerName: string, phase: string) => ({ metadata: { name: phase }, spec: { where: 'gpu' }, status: { offer: offerName, phase } }) as never;
const now = new Date('2026-12-01T00:00:00Z');

describe('offerStatus', () => {
  it('counts only active Leases of this Offer and is Ready for a command Offer', () => {
    const st = offerStatus(offer({ command: { acquire: ['/a'], release: ['/r'], shape: {} } }),
      [lease('box', 'Ready'), lease('box', 'Launching'), lease('box', 'Released'), lease('other', 'Ready'), lease('box', 'Releasing')], now);
    expect(st.activeLeases).toBe(3);
    expect(st.observedGeneration).toBe(3);
    expect(st.conditions?.[0]).toMatchObject({ type: 'Ready', status: 'True', reason: 'CommandConfigured' });
  });
  it('says a Lambda Offer cannot serve yet', () => {
    const st = offerStatus(offer({ lambda: {} }), [], now);
    expect(st.conditions?.[0]).toMatchObject({ status: 'False', reason: 'LambdaNotSupported' });
  });
});
