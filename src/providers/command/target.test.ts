import { describe, expect, it } from '@jest/globals';
import { parseTarget, salvageState } from './target.js';

const ED25519 = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBcSsYOJcAf4L5+P1tE3cpXVv3qqHlgqFgDg1VTnhUv6';
const ECDSA =
  'ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBMMdAuiPBUaOK8eUS9lEqJBoS3ons1ORfe0yAjHJ6WDd86IVZ/MMfVn6XR1qzuKn74qYb6HQ0iEhaJXvuuIIaCc=';

function reasonFor(stdout: string): string {
  const parsed = parseTarget(stdout);
  if (parsed.ok) throw new Error(`expected ${JSON.stringify(stdout)} to be refused, got ${JSON.stringify(parsed.target)}`);
  return parsed.reason;
}

describe('parseTarget accepts', () => {
  it('an ssh target on the last line, with the port defaulting to 22, and keeps the line as state', () => {
    const line = `{"ssh":{"host":"10.0.0.5","host_key":"${ED25519}"},"instance_id":"i-0abc","zone":"us-east-1a"}`;
    expect(parseTarget(`creating instance...\n{"progress":1}\n${line}\n\n`)).toEqual({
      ok: true,
      target: { ssh: { host: '10.0.0.5', port: 22, hostKey: ED25519 } },
      state: line,
    });
  });

  it.each([
    ['a DNS name, port and user', { host: 'gpu-1.internal.example.com', port: 2222, user: 'ubuntu' }, { host: 'gpu-1.internal.example.com', port: 2222, user: 'ubuntu' }],
    ['an IPv6 literal', { host: '2001:db8::5' }, { host: '2001:db8::5', port: 22 }],
    ['a bracketed IPv6 literal', { host: '[::1]', port: 22 }, { host: '::1', port: 22 }],
    ['a name with a trailing dot', { host: 'box.example.' }, { host: 'box.example.', port: 22 }],
    ['an ECDSA host key with a comment, which is dropped', { host: 'h', host_key: `${ECDSA} root@box` }, { host: 'h', port: 22, hostKey: ECDSA }],
    ['loopback (tests run sshd there)', { host: '127.0.0.1', port: 40022 }, { host: '127.0.0.1', port: 40022 }],
  ])('ssh: %s', (_, ssh, expected) => {
    const parsed = parseTarget(JSON.stringify({ ssh }));
    expect(parsed).toMatchObject({ ok: true, target: { ssh: expected } });
  });

  it.each([
    ['https://10.0.0.5:7070', 'https://10.0.0.5:7070/'],
    ['http://Box.Example.com/agent', 'http://box.example.com/agent'],
    ['ssh://ubuntu@10.0.0.5:2222', 'ssh://ubuntu@10.0.0.5:2222'],
  ])('url %s', (url, href) => {
    expect(parseTarget(JSON.stringify({ url }))).toMatchObject({ ok: true, target: { url: href } });
  });

  it('a line ending in CRLF', () => {
    expect(parseTarget('{"url":"https://h"}\r\n')).toMatchObject({ ok: true, state: '{"url":"https://h"}' });
  });

  it('nesting of up to 32 levels in extra fields', () => {
    const nested = `${'['.repeat(31)}${']'.repeat(31)}`;
    expect(parseTarget(`{"url":"https://h","x":${nested}}`).ok).toBe(true);
  });
});

describe('parseTarget refuses, saying what to print instead', () => {
  it.each([
    ['nothing at all', '', /printed nothing on stdout; print one JSON object .*\{"ssh":\{"host":"10\.0\.0\.5"/],
    ['only blank lines', '\n  \n', /printed nothing on stdout/],
    ['a non-JSON last line', '{"url":"https://h"}\ndone\n', /printed no JSON object on its last stdout line \(it printed "done"\); print one like \{"ssh"/],
    ['an array', '[{"url":"https://h"}]', /is a JSON array, not a JSON object/],
    ['a number', '42', /is the number 42, not a JSON object/],
    ['a string', '"ssh://h"', /is the string "ssh:\/\/h", not a JSON object/],
    ['null', 'null', /is null, not a JSON object/],
    ['a deep JSON bomb', `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}`, /nests JSON deeper than 32 levels/],
    ['more than 16 KiB', `{"url":"https://h","pad":"${'x'.repeat(17000)}"}`, /more than 16 KiB on stdout; print only the target/],
    ['neither ssh nor url', '{"instance":"i-1"}', /neither "ssh" nor "url".*add one/],
    ['both ssh and url', '{"ssh":{"host":"h"},"url":"https://h"}', /both "ssh" and "url"; print exactly one/],
    ['a unix: url', '{"url":"unix:///run/x.sock"}', /names a local socket; local sockets are refused/],
    ['an http+unix url', '{"url":"http+unix://%2Frun%2Fx.sock/"}', /local sockets are refused/],
    ['a file: url', '{"url":"file:///run/x.sock"}', /local sockets are refused/],
    ['a socket path as url', '{"url":"/run/leasehold.sock"}', /local socket path; local sockets are refused/],
    ['a socket path as ssh host', '{"ssh":{"host":"/var/run/sock"}}', /ssh\.host "\/var\/run\/sock" is a local socket path; local sockets are refused: give the machine's DNS name or IP address/],
    ['an unsupported scheme', '{"url":"ftp://h/"}', /scheme "ftp".*use http:\/\/, https:\/\/ or ssh:\/\//],
    ['a relative url', '{"url":"box:7070"}', /scheme "box"/],
    ['a url that is not one', '{"url":"http://"}', /not an absolute URL/],
    ['ssh as a string', '{"ssh":"ubuntu@h"}', /"ssh" is the string "ubuntu@h"; it must be an object like \{"host"/],
    ['a missing host', '{"ssh":{"port":22}}', /ssh\.host is missing; set it/],
    ['a host with a space', '{"ssh":{"host":"h x"}}', /is not a DNS name or IP address .*no spaces, slashes or shell characters/],
    ['a host with shell characters', '{"ssh":{"host":"h;reboot"}}', /is not a DNS name or IP address/],
    ['a host command substitution', '{"ssh":{"host":"$(reboot)"}}', /is not a DNS name or IP address/],
    ['a host that looks like an ssh option', '{"ssh":{"host":"-oProxyCommand=reboot"}}', /is not a DNS name or IP address/],
    ['a bad IPv4 address', '{"ssh":{"host":"10.0.0.256"}}', /is not a DNS name or IP address/],
    ['port 0', '{"ssh":{"host":"h","port":0}}', /ssh\.port is the number 0; it must be a whole number from 1 to 65535, or left out for 22/],
    ['port 70000', '{"ssh":{"host":"h","port":70000}}', /ssh\.port is the number 70000/],
    ['a fractional port', '{"ssh":{"host":"h","port":22.5}}', /ssh\.port is the number 22\.5/],
    ['a port as a string', '{"ssh":{"host":"h","port":"22"}}', /ssh\.port is the string "22"/],
    ['a user with shell characters', '{"ssh":{"host":"h","user":"root;id"}}', /ssh\.user is the string "root;id"; it must be a login name/],
    ['a user that looks like an option', '{"ssh":{"host":"h","user":"-x"}}', /ssh\.user/],
    ['a host key of an unknown type', '{"ssh":{"host":"h","host_key":"ssh-foo AAAA"}}', /host_key "ssh-foo AAAA" is not an OpenSSH public key line: its key type "ssh-foo"/],
    ['a security-key host key, which the SSH client refuses', '{"ssh":{"host":"h","host_key":"sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t"}}', /key type "sk-ssh-ed25519@openssh.com" is a security-key type, which cannot be a host key/],
    ['a security-key ECDSA host key', '{"ssh":{"host":"h","host_key":"sk-ecdsa-sha2-nistp256@openssh.com AAAA"}}', /is a security-key type, which cannot be a host key/],
    ['a host key without key data', '{"ssh":{"host":"h","host_key":"ssh-ed25519"}}', /not base64 key data/],
    ['a host key whose data is another type', `{"ssh":{"host":"h","host_key":"ssh-rsa ${ED25519.split(' ')[1]}"}}`, /does not hold a ssh-rsa key/],
    ['a host key that is a fingerprint', '{"ssh":{"host":"h","host_key":"SHA256:abc"}}', /is not an OpenSSH public key line.*ssh_host_ed25519_key\.pub/],
  ])('%s', (_, stdout, reason) => {
    expect(reasonFor(stdout)).toMatch(reason);
  });

  it('quotes untrusted text cleaned up and short', () => {
    const reason = reasonFor(`\x1b[31m${'z'.repeat(500)}`);
    expect(reason).not.toMatch(/\x1b/);
    expect(reason).toMatch(/it printed "z{59}…"/);
  });
});

describe('salvageState', () => {
  it('finds the last complete JSON object line', () => {
    expect(salvageState('log\n{"instance":"i-1"}\nnot json\n', false)).toBe('{"instance":"i-1"}');
    expect(salvageState('{"instance":"i-1"}\n{"instance":"i-2"}', false)).toBe('{"instance":"i-2"}');
  });

  it('ignores a cut-off last line when stdout was truncated', () => {
    expect(salvageState('{"instance":"i-1"}\n{"instance":"i-2"}', true)).toBe('{"instance":"i-1"}');
  });

  it('is empty when there is no JSON object', () => {
    expect(salvageState('', false)).toBe('');
    expect(salvageState('[1]\n42\n"x"\n', false)).toBe('');
    expect(salvageState(`${'['.repeat(100)}${']'.repeat(100)}`, false)).toBe('');
  });
});
