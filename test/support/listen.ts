import type { Server } from 'node:net';

/** Listens on 127.0.0.1 on an ephemeral port; resolves with the port. */
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on a TCP port');
  return address.port;
}
