import { describe, expect, it, jest } from '@jest/globals';
import type { CoreV1Event } from '@kubernetes/client-node';
import pino from 'pino';
import { EventRecorder, type EventSink } from './events.js';

function sink() {
  const calls: string[] = [];
  const s: EventSink = {
    create: async (_ns: string, e: CoreV1Event) => void calls.push(`create:${e.reason}:${e.count}:${e.message}`),
    updateCount: async (_ns: string, _name: string, count: number, _at: Date, message?: string) => void calls.push(`update:${count}:${message ?? ''}`),
  };
  return { s, calls };
}
const fleet = { apiVersion: 'leasehold.dev/v1alpha1', kind: 'PeerFleet', metadata: { name: 'gpu', namespace: 'lend', uid: 'u1' }, spec: {} };
const log = pino({ level: 'silent' });
const until = async (what: () => boolean) => {
  for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 5));
};

describe('EventRecorder.recordSeries', () => {
  it('counts repeats with the same reason on one Event, whatever their messages, and writes the count and latest message at most once an interval', async () => {
    const { s, calls } = sink();
    const rec = new EventRecorder(s, 'test', log, 'default', 50);
    await rec.recordSeries(fleet, 'Normal', 'Claimed', 'node a claims peer Job j1');
    await rec.recordSeries(fleet, 'Normal', 'Claimed', 'node b claims peer Job j2');
    await rec.recordSeries(fleet, 'Normal', 'Claimed', 'node a claims peer Job j3');
    expect(calls).toEqual(['create:Claimed:1:node a claims peer Job j1']);
    await until(() => calls.length > 1);
    expect(calls).toEqual(['create:Claimed:1:node a claims peer Job j1', 'update:3:node a claims peer Job j3']);
  });

  it('another reason or type is another Event; a repeat after the interval is written at once', async () => {
    const { s, calls } = sink();
    const rec = new EventRecorder(s, 'test', log, 'default', 0);
    await rec.recordSeries(fleet, 'Normal', 'Claimed', 'one');
    await rec.recordSeries(fleet, 'Normal', 'SessionEnded', 'two');
    await rec.recordSeries(fleet, 'Warning', 'Claimed', 'three');
    await rec.recordSeries(fleet, 'Normal', 'Claimed', 'four');
    expect(calls).toEqual(['create:Claimed:1:one', 'create:SessionEnded:1:two', 'create:Claimed:1:three', 'update:2:four']);
  });

  it('record keeps one Event per message', async () => {
    const { s, calls } = sink();
    const rec = new EventRecorder(s, 'test', log, 'default', 0);
    await rec.record(fleet, 'Normal', 'Claimed', 'one');
    await rec.record(fleet, 'Normal', 'Claimed', 'two');
    await rec.record(fleet, 'Normal', 'Claimed', 'one');
    expect(calls).toEqual(['create:Claimed:1:one', 'create:Claimed:1:two', 'update:2:one']);
  });
});

describe('EventRecorder.record', () => {
  it('counts a repeat on the first Event and writes the count at most once an interval, not once a repeat', async () => {
    const { s, calls } = sink();
    const rec = new EventRecorder(s, 'test', log, 'default', 60);
    for (let i = 0; i < 50; i++) await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'no Offer matches gpu');
    expect(calls).toEqual(['create:NoMatchingOffer:1:no Offer matches gpu']);
    await until(() => calls.length > 1);
    expect(calls).toEqual(['create:NoMatchingOffer:1:no Offer matches gpu', 'update:50:no Offer matches gpu']);
  });

  it('another object, type or message is its own Event', async () => {
    const { s, calls } = sink();
    const rec = new EventRecorder(s, 'test', log, 'default', 60_000);
    const other = { ...fleet, metadata: { ...fleet.metadata, name: 'cpu', uid: 'u2' } };
    await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'a');
    await rec.record(other, 'Warning', 'NoMatchingOffer', 'a');
    await rec.record(fleet, 'Normal', 'NoMatchingOffer', 'a');
    await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'b');
    await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'a');
    expect(calls).toEqual(['create:NoMatchingOffer:1:a', 'create:NoMatchingOffer:1:a', 'create:NoMatchingOffer:1:a', 'create:NoMatchingOffer:1:b']);
  });

  it('starts a new Event once a run has been quiet for the series window', async () => {
    const { s, calls } = sink();
    const rec = new EventRecorder(s, 'test', log, 'default', 0);
    const start = Date.parse('2026-12-06T10:00:00Z');
    jest.useFakeTimers({ now: start });
    try {
      await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'a');
      jest.setSystemTime(start + 5 * 60_000);
      await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'a');
      jest.setSystemTime(start + 12 * 60_000);
      await rec.record(fleet, 'Warning', 'NoMatchingOffer', 'a');
    } finally {
      jest.useRealTimers();
    }
    expect(calls).toEqual(['create:NoMatchingOffer:1:a', 'update:2:a', 'create:NoMatchingOffer:1:a']);
  });
});
