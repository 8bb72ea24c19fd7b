import { randomUUID } from 'node:crypto';
import { createParser } from 'eventsource-parser';
import { ACKNOWLEDGED_METHOD, LISTEN_METHOD } from '../../../machines/listen-wire.js';
import type { ListenFact } from '../../../machines/tasks/task-follow-listen.js';
import { type FollowIo, tasksPost } from './tasks-follow.js';

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * One task listen (`subscriptions/listen` with `notifications.taskIds: [taskId]`) as the follow's facts:
 * its acknowledgement, the followed task's notifications, its end. Reads and reports; decides nothing
 * (`machines/tasks/task-follow-listen.ts` does).
 */
export class TaskListenStream {
  private readonly abort = new AbortController();
  private readonly queue: ListenFact[] = [];
  private waiting: (() => void) | undefined;
  private ended = false;

  private constructor(private readonly taskId: string) {}

  /** Opens the listen on `io`; the first fact (`next`) is its acknowledgement or its end. */
  static open(io: FollowIo, taskId: string): TaskListenStream {
    const stream = new TaskListenStream(taskId);
    void stream.run(io);
    return stream;
  }

  /**
   * The next fact, or undefined when `signal` aborts first (the application's cancel). With `withinMs`,
   * silence that long closes the listen and is reported `listen-quiet`.
   */
  async next(signal?: AbortSignal, withinMs?: number): Promise<ListenFact | undefined> {
    const deadline = withinMs === undefined ? undefined : Date.now() + withinMs;
    for (;;) {
      const fact = this.queue.shift();
      if (fact) return fact;
      if (signal?.aborted) return undefined;
      if (deadline !== undefined && Date.now() >= deadline) {
        this.close();
        return { kind: 'listen-quiet', at: Date.now() };
      }
      await new Promise<void>((resolve) => {
        const timer = deadline === undefined ? undefined : setTimeout(done, deadline - Date.now());
        function done() {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          resolve();
        }
        this.waiting = () => {
          this.waiting = undefined;
          done();
        };
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  close(): void {
    this.ended = true;
    this.abort.abort();
  }

  private push(fact: ListenFact): void {
    this.queue.push(fact);
    this.waiting?.();
  }

  private end(refused: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.push({ kind: 'listen-end', refused, at: Date.now() });
  }

  private async run(io: FollowIo): Promise<void> {
    try {
      const response = await io.fetch(
        io.url,
        tasksPost(
          io,
          {
            jsonrpc: '2.0',
            id: `listen-${randomUUID()}`,
            method: LISTEN_METHOD,
            params: { notifications: { taskIds: [this.taskId] }, _meta: io.meta },
          },
          // The application's cancel ends the listen's POST too, even before its headers came.
          io.signal ? AbortSignal.any([this.abort.signal, io.signal]) : this.abort.signal,
        ),
      );
      const stream = response.ok && response.headers.get('content-type')?.includes('text/event-stream');
      if (!stream || !response.body) {
        // An error status, a JSON-RPC error or a plain JSON body: not a listen this server serves.
        await response.body?.cancel().catch(() => undefined);
        return this.end(true);
      }
      const parser = createParser({ onEvent: (e) => this.message(e.data) });
      const decoder = new TextDecoder();
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        if (this.ended) return;
        parser.feed(decoder.decode(chunk, { stream: true }));
      }
      this.end(false);
    } catch {
      // A cut, a reset, a refused connection: a break, never the task's end.
      this.end(false);
    }
  }

  private message(data: string): void {
    let m: unknown;
    try {
      m = JSON.parse(data);
    } catch {
      return;
    }
    if (!isObject(m) || !isObject(m.params)) return;
    const at = Date.now();
    if (m.method === ACKNOWLEDGED_METHOD) {
      const ids = isObject(m.params.notifications) ? m.params.notifications.taskIds : undefined;
      this.push({
        kind: 'listen-ack',
        taskIds: Array.isArray(ids) ? ids.filter((i): i is string => typeof i === 'string') : [],
        at,
      });
    } else if (m.method === 'notifications/tasks' && m.params.taskId === this.taskId) {
      this.push({ kind: 'listen-notice', task: m.params, at });
    }
  }
}
