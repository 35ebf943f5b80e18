import { describe, expect, it } from '@jest/globals';
import { sshArgs } from './ssh.js';
import { sshTargetOf, validHost, validUser } from './target.js';

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

describe('the SSH target a Lease status names', () => {
  it.each([
    ['10.0.0.5', true],
    ['2001:db8::1', true],
    ['box-1.example.com', true],
    ['localhost', true],
    ['-oProxyCommand=touch /tmp/pwned', false],
    ['-p22', false],
    ['host name', false],
    ['a..b', false],
    ['-host', false],
    ['host;id', false],
    ['', false],
    ['x'.repeat(254), false],
  ])('host %j valid: %p', (host, ok) => expect(validHost(host)).toBe(ok));

  it.each([
    ['ubuntu', true],
    ['svc_runner.1', true],
    ['-oProxyCommand=x', false],
    ['root@evil', false],
    ['a b', false],
    ['', false],
    ['u'.repeat(33), false],
  ])('user %j valid: %p', (user, ok) => expect(validUser(user)).toBe(ok));

  it('refuses a host that ssh would read as an option, naming the field and what to do', () => {
    expect(() => sshTargetOf('ns/box', { host: '-oProxyCommand=touch /tmp/pwned', port: 22, user: 'u', hostKey: KEY })).toThrow(
      /^Lease ns\/box status\.machine\.ssh\.host "-oProxyCommand=touch \/tmp\/pwned" is not a host name or IP address; the CLI will not connect to it\. Only the controller writes/,
    );
    expect(() => sshTargetOf('ns/box', { host: 'h', user: '-oX=y', hostKey: KEY })).toThrow(/status\.machine\.ssh\.user "-oX=y" is not a POSIX user name/);
    expect(() => sshTargetOf('ns/box', { host: 'h', user: 'u', port: 0, hostKey: KEY })).toThrow(/status\.machine\.ssh\.port 0 is not a port/);
    // A second known_hosts line would trust another key for any host.
    expect(() => sshTargetOf('ns/box', { host: 'h', user: 'u', hostKey: `${KEY}\n* ${KEY}` })).toThrow(/status\.machine\.ssh\.hostKey/);
  });

  it('passes a valid target through, and ssh gets -- before the destination', () => {
    const target = sshTargetOf('ns/box', { host: '127.0.0.1', port: 2222, user: 'u', hostKey: KEY });
    expect(target).toEqual({ host: '127.0.0.1', port: 2222, user: 'u', hostKey: KEY });
    const args = sshArgs(target, '/k', '/kh', []);
    expect(args.slice(-2)).toEqual(['--', 'u@127.0.0.1']);
  });
});
