// Runs inside the real node's network namespace: accepts TCP connections on the
// addresses given and carries each one to a Unix socket, whose other end (in the
// test process, on the host's loopback) reaches the API server. Unix sockets are
// shared through the file system, so no address outside loopback and the
// namespace is ever used.
//
//   node relay.mjs <unix-socket> <host:port> [<host:port> ...]
import { createConnection, createServer } from 'node:net';

const [socket, ...listens] = process.argv.slice(2);
if (!socket || listens.length === 0) {
  console.error('usage: relay.mjs <unix-socket> <host:port>...');
  process.exit(2);
}

let ready = 0;
for (const listen of listens) {
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at);
  const port = Number(listen.slice(at + 1));
  createServer((client) => {
    const upstream = createConnection(socket);
    client.setNoDelay(true);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
  }).listen(port, host, () => {
    ready += 1;
    if (ready === listens.length) console.log('relay ready');
  });
}
process.on('SIGTERM', () => process.exit(0));
