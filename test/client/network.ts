/**
 * A recording, fault-injecting wrapper around the real fetch: every request reaches the real server on
 * 127.0.0.1 unless a rule says the network fails it. It stands for the network, never for the client or
 * server under test.
 */
export interface SeenRequest {
  readonly method: string;
  readonly headers: Headers;
  readonly body: unknown;
}

export type Rule = (
  request: SeenRequest,
  attempt: number,
) =>
  | 'pass'
  | 'refuse'
  | 'reset-after-send'
  | Response
  | 'stall-after-first-chunk'
  | 'reset-after-first-chunk';

export function networkFetch() {
  const seen: SeenRequest[] = [];
  const headed: SeenRequest[] = [];
  const rules: Rule[] = [];
  const attempts = new Map<Rule, number>();
  const fetchImpl = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
    const request: SeenRequest = { method: init?.method ?? 'GET', headers: new Headers(init?.headers), body };
    seen.push(request);
    for (const rule of rules) {
      const n = (attempts.get(rule) ?? 0) + 1;
      const verdict = rule(request, n);
      if (verdict === 'pass') continue;
      attempts.set(rule, n);
      if (verdict instanceof Response) return verdict;
      if (verdict === 'refuse')
        throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
      const response = await fetch(url, init);
      if (verdict === 'reset-after-send') {
        await response.body?.cancel();
        throw Object.assign(new TypeError('terminated'), { cause: { code: 'ECONNRESET' } });
      }
      return afterFirstChunk(response, init?.signal ?? undefined, verdict === 'reset-after-first-chunk');
    }
    const response = await fetch(url, init);
    headed.push(request);
    return response;
  };
  return {
    fetch: fetchImpl,
    seen,
    /** Requests passed through untouched whose response headers have arrived (the server answered). */
    headed,
    /** Adds a rule; it applies to requests for which it does not answer 'pass'. */
    when(rule: Rule) {
      rules.push(rule);
    },
    count(predicate: (r: SeenRequest) => boolean) {
      return seen.filter(predicate).length;
    },
  };
}

/**
 * The first chunk gets through, then either a reset (the body errors as Node's fetch does) or a black
 * hole (nothing more, and the connection never closes).
 */
function afterFirstChunk(response: Response, signal: AbortSignal | undefined, reset: boolean): Response {
  const reader = response.body?.getReader();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const first = await reader?.read();
      if (first && !first.done) controller.enqueue(first.value);
      if (reset) {
        void reader?.cancel();
        controller.error(Object.assign(new TypeError('terminated'), { cause: { code: 'ECONNRESET' } }));
        return;
      }
      signal?.addEventListener('abort', () => {
        void reader?.cancel();
        controller.error(new DOMException('aborted', 'AbortError'));
      });
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

export const isToolCall = (name?: string) => (r: SeenRequest) =>
  r.method === 'POST' &&
  (r.body as { method?: string })?.method === 'tools/call' &&
  (name === undefined || (r.body as { params?: { name?: string } }).params?.name === name);

export const isInitialize = (r: SeenRequest) => (r.body as { method?: string })?.method === 'initialize';
export const isResume = (r: SeenRequest) => r.method === 'GET' && r.headers.has('last-event-id');
