import { checkEndpoint, parseEndpointList, type EndpointPolicy } from './endpoints.js';

const policy = (allowed: string[], allowLoopbackHTTP = false): EndpointPolicy => ({ allowed, allowLoopbackHTTP });

describe('checkEndpoint', () => {
  it.each([
    ['the listed base itself', 'https://api.github.com', ['https://api.github.com'], true],
    ['a trailing slash', 'https://api.github.com/', ['https://api.github.com'], true],
    ['a path below the base', 'https://compute.googleapis.com/compute/v1', ['https://compute.googleapis.com'], true],
    ['a path beside the base', 'https://ghe.example.com/api/v3x', ['https://ghe.example.com/api/v3'], false],
    ['another host', 'https://evil.example.com', ['https://api.github.com'], false],
    ['a host that only starts like the listed one', 'https://api.github.com.evil.example', ['https://api.github.com'], false],
    ['another port', 'https://api.github.com:8443', ['https://api.github.com'], false],
    ['plain http, even when listed', 'http://api.github.com', ['http://api.github.com'], false],
    ['loopback http without the test flag', 'http://127.0.0.1:8080', ['http://127.0.0.1:8080'], false],
    ['an empty list', 'https://api.github.com', [], false],
    ['credentials in the URL', 'https://user:pw@api.github.com', ['https://api.github.com'], false],
  ])('%s', (_what, url, allowed, ok) => {
    expect(checkEndpoint(url, policy(allowed), 'spec.github.apiURL', 'runnerTarget.allowedEndpoints.github').allowed).toBe(ok);
  });

  it('allows loopback http only behind the test flag, and only when listed', () => {
    expect(checkEndpoint('http://127.0.0.1:8080/v1', policy(['http://127.0.0.1:8080'], true), 'f', 's').allowed).toBe(true);
    expect(checkEndpoint('http://127.0.0.1:9090', policy(['http://127.0.0.1:8080'], true), 'f', 's').allowed).toBe(false);
    expect(checkEndpoint('http://10.0.0.5:8080', policy(['http://10.0.0.5:8080'], true), 'f', 's').allowed).toBe(false);
  });

  it('names the field, the allowed list and the chart value to change', () => {
    const v = checkEndpoint('https://evil.example.com/x', policy(['https://api.github.com']), 'spec.github.apiURL', 'runnerTarget.allowedEndpoints.github');
    expect(v).toEqual({
      allowed: false,
      reason: expect.stringMatching(/spec\.github\.apiURL https:\/\/evil\.example\.com\/x .*allowed: https:\/\/api\.github\.com.*runnerTarget\.allowedEndpoints\.github/),
    });
  });
});

describe('parseEndpointList', () => {
  it('splits, trims and drops empty entries', () => {
    expect(parseEndpointList(' https://a.example , ,https://b.example/api/v3', '--f')).toEqual(['https://a.example', 'https://b.example/api/v3']);
  });
  it.each(['ftp://a.example', 'not a url', 'https://u:p@a.example', 'https://a.example/?q=1'])('refuses %s naming the flag', (entry) => {
    expect(() => parseEndpointList(entry, '--allowed-github-endpoints')).toThrow(/--allowed-github-endpoints/);
  });
});
