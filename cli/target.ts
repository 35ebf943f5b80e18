// Where the CLI connects, read from a Lease's status: checked before ssh or
// the SSH client sees it. Status is written by the controller, but a value
// such as `-oProxyCommand=...` must never reach ssh as an option, whoever
// wrote it.
import { isIP } from 'node:net';
import { EXIT, ExitError } from './exit-codes.js';

export interface SSHTarget {
  host: string;
  port: number;
  user: string;
  hostKey: string;
}

/** RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens, 253 characters at most. */
const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;
/** POSIX portable user names: letters, digits, `.`, `_` and `-`, not starting with `-`; 32 characters at most, as useradd allows. */
const USER = /^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}$/;

export const validHost = (host: string) => isIP(host) !== 0 || HOSTNAME.test(host);
export const validUser = (user: string) => USER.test(user);

/** The SSH target a Lease's status names; a clear error, naming the field, when it is not a host, user and port. */
export function sshTargetOf(lease: string, ssh: { host?: unknown; port?: unknown; user?: unknown; hostKey?: unknown } | undefined): SSHTarget {
  const bad = (field: string, value: unknown, what: string) =>
    new ExitError(
      `Lease ${lease} status.machine.ssh.${field} ${JSON.stringify(value)} is not ${what}; the CLI will not connect to it. Only the controller writes a Lease's status: ask a platform admin to check who changed it, or delete the Lease and lease another`,
      EXIT.error,
    );
  if (!ssh) throw new ExitError(`Lease ${lease} has no status.machine.ssh; wait for it to be Ready`, EXIT.error);
  const { host, user, hostKey } = ssh;
  const port = ssh.port ?? 22;
  if (typeof host !== 'string' || !validHost(host)) throw bad('host', host, 'a host name or IP address');
  if (typeof user !== 'string' || !validUser(user)) throw bad('user', user, 'a POSIX user name (letters, digits, ., _ and -, not starting with -)');
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) throw bad('port', port, 'a port from 1 to 65535');
  if (typeof hostKey !== 'string' || !/^[a-z0-9@.-]+ [A-Za-z0-9+/=]+( [^\n]*)?\n?$/.test(hostKey)) throw bad('hostKey', hostKey, 'one OpenSSH public key line');
  return { host, port, user, hostKey };
}
