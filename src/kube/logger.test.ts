import { describe, expect, it } from '@jest/globals';
import { createLogger, forObject } from './logger.js';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } });
  return { log, lines };
}

describe('createLogger', () => {
  it('writes JSON lines with a level label and redacts secret-looking fields', () => {
    const { log, lines } = capture();
    log.info({ token: 't0p', offer: { apiKey: 'k3y', name: 'gpu' }, headers: { authorization: 'Bearer x' } }, 'hello');
    expect(lines[0]).toMatchObject({ level: 'info', msg: 'hello', component: 'leasehold', token: '[redacted]', offer: { apiKey: '[redacted]', name: 'gpu' }, headers: { authorization: '[redacted]' } });
    expect(typeof lines[0]!.time).toBe('string');
  });

  it('forObject names the object a line is about', () => {
    const { log, lines } = capture();
    forObject(log, { kind: 'Lease', metadata: { namespace: 'team', name: 'l1' } }).debug('seen');
    expect(lines[0]).toMatchObject({ kind: 'Lease', namespace: 'team', name: 'l1', msg: 'seen' });
  });
});
