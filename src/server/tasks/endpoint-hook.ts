import type { JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { handsToKeyed } from '../../../machines/server/era.js';
import type { RunOnSdk } from '../modern/keyed-hook.js';
import type { Tasks } from './runtime.js';

/**
 * The 2026-07-28 endpoint's hook for the tasks extension: hands a request to `tasks` first, and builds the
 * run a task's tool gets. A `tools/call` whose standard headers disagree with its body is left to the SDK
 * (which answers -32020), as the keyed hook does. Returns undefined when the tasks runtime does not serve it.
 */
export function serveTasks(
  tasks: Tasks | undefined,
  input: {
    readonly url: string;
    readonly headers: Headers;
    readonly body: unknown;
    readonly principal: string | undefined;
  },
  call: (request: Request) => Promise<Response>,
): Promise<Response> | undefined {
  const body = input.body;
  if (!tasks || typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const message = body as JsonRpcRequest;
  if (message.method === 'tools/call' && !handsToKeyed(body, input.headers)) return undefined;
  const run: RunOnSdk = (m, signal) =>
    call(
      new Request(input.url, {
        method: 'POST',
        headers: toolCallHeaders(input.headers, m),
        body: JSON.stringify(m),
        signal,
      }),
    );
  return tasks.serve(message, input.principal, run);
}

/**
 * The headers of a task's run: the client's (protocol version, accept, authorization), with `Mcp-Method`
 * and `Mcp-Name` of the `tools/call` it runs (a re-run is started by a `tasks/update`, whose headers name
 * that method and the task).
 */
export function toolCallHeaders(headers: Headers, message: JsonRpcRequest): Headers {
  const out = new Headers(headers);
  out.delete('content-length');
  out.set('mcp-method', 'tools/call');
  const name = message.params?.name;
  if (typeof name === 'string')
    out.set(
      'mcp-name',
      encodeURIComponent(name) === name ? name : `=?base64?${Buffer.from(name).toString('base64')}?=`,
    );
  return out;
}
