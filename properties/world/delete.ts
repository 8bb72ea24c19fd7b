import type { SimNetwork } from './network.js';
import type { Recorder } from './recorder.js';
import type { SimServer } from './server.js';

/**
 * A closing client's DELETE of its session, as the runtime's transport sends it (src/client/transport.ts
 * `sendDelete`), or a stranger's with a session id it learned: a request of its own on the network, served by the server's `serve` like any other, so
 * the answer is the runtime's (`deleteAnswer`). What came back is recorded for the checks.
 */
export function sendDelete(
  net: SimNetwork,
  server: SimServer,
  recorder: Recorder,
  sessionId: string,
  /** A stranger who learned the id; absent: the application that created the session. */
  stranger?: string,
  /** Told once the DELETE is over: answered, or its connection failed. */
  onDone?: () => void,
): void {
  net.connect(
    { method: 'DELETE', sessionId, protocolVersion: '2025-11-25', principal: stranger },
    (event) => {
      if (event.type === 'http.response')
        recorder.deleteAnswers.push({ sessionId, status: event.status, at: net.clock.now(), stranger });
      if (event.type === 'http.response' || event.type === 'net.failed') onDone?.();
    },
    (conn) => {
      if (stranger === undefined) recorder.deletesArrived.add(sessionId);
      server.serve(conn);
    },
  );
}
