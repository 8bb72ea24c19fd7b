import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';
import type { RawAnswer } from './attempt-exchange.js';

/**
 * The ONE Response the SDK gets for a call, however many attempts it took. It is created when the first
 * message is delivered (an SSE stream the messages are written to, in order, without SSE ids: the SDK
 * must not try the removed `Last-Event-ID` resumption) or, when the call ends before any message, as the
 * final answer alone.
 */
export class SdkResponse {
  private controller?: ReadableStreamDefaultController<Uint8Array>;
  private settled = false;
  private closed = false;
  private streaming = false;
  private readonly encoder = new TextEncoder();
  readonly promise: Promise<Response>;
  private resolve!: (r: Response) => void;
  private reject!: (e: unknown) => void;

  constructor() {
    this.promise = new Promise<Response>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // A rejection nobody awaits yet (the SDK always awaits) must not crash the process.
    this.promise.catch(() => undefined);
  }

  /** The SSE stream has been handed to the SDK: the rest of the call goes into it. */
  get isOpen(): boolean {
    return this.streaming;
  }

  /** Writes one message; the first one opens the SSE Response. */
  write(message: JsonRpcMessage): void {
    if (this.closed) return;
    if (!this.settled) this.open();
    try {
      this.controller?.enqueue(this.encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`));
    } catch {
      // The SDK stopped reading (it cancelled): nothing more to write.
      this.closed = true;
    }
  }

  /** The call ended with `final`: the last event of the open stream, or the whole answer. */
  end(final: JsonRpcMessage): void {
    if (this.settled) {
      this.write(final);
      this.close();
      return;
    }
    this.settled = true;
    this.resolve(
      new Response(JSON.stringify(final), { status: 200, headers: { 'content-type': 'application/json' } }),
    );
  }

  /** The call ended before any message with an HTTP answer the SDK should see as it came. */
  endWith(answer: RawAnswer): void {
    if (this.settled) {
      this.close();
      return;
    }
    this.settled = true;
    const headers = new Headers(answer.headers);
    // The text is decoded: its length and encoding are no longer those of the wire.
    headers.delete('content-encoding');
    headers.delete('content-length');
    this.resolve(
      new Response(answer.text, { status: answer.status, statusText: answer.statusText, headers }),
    );
  }

  /** The call ended with an error the SDK's fetch would have thrown (no connection; the SDK aborted). */
  fail(error: unknown): void {
    if (!this.settled) {
      this.settled = true;
      this.reject(error);
      return;
    }
    if (this.closed) return;
    this.closed = true;
    try {
      this.controller?.error(error);
    } catch {
      // already closed
    }
  }

  private open(): void {
    this.settled = true;
    this.streaming = true;
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.controller = controller;
      },
      cancel: () => {
        this.closed = true;
      },
    });
    this.resolve(
      new Response(stream, {
        status: 200,
        headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
      }),
    );
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.controller?.close();
    } catch {
      // already closed
    }
  }
}
