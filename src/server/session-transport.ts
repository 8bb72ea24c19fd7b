import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  isJSONRPCRequest,
  type JSONRPCMessage,
  type MessageExtraInfo,
} from '@modelcontextprotocol/sdk/types.js';
import type { UnansweredCause } from '../../machines/server/session.machine.js';

/** Where the messages the SDK server sends go: the session runtime (a method, not a closure per session). */
export interface SessionOutbound {
  outbound(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void>;
}

/**
 * The SDK `Transport` one session's SDK server is connected through. It only relays: messages from
 * HTTP go to `onmessage`; messages the SDK sends go to the session runtime, which stores, then sends.
 */
export class SessionTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;
  private closed = false;

  constructor(
    readonly sessionId: string,
    private readonly session: SessionOutbound,
  ) {}

  async start(): Promise<void> {}

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.closed) throw new Error(`session ${this.sessionId} is closed`);
    await this.session.outbound(message, options);
  }

  /** Hands a client message to the SDK server. */
  receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    this.onmessage?.(message, extra);
  }

  /**
   * Hands a client request to the SDK server. Undefined when the SDK server will answer it; otherwise why
   * it will not: its schema rejects the message (it would drop it silently; admission is meant to have
   * refused it already), or no SDK server listens (closed), or it threw.
   */
  receiveRequest(message: JSONRPCMessage, extra?: MessageExtraInfo): UnansweredCause | undefined {
    if (!isJSONRPCRequest(message)) return 'rejected';
    if (this.closed || !this.onmessage) return 'failed';
    try {
      this.onmessage(message, extra);
      return undefined;
    } catch {
      return 'failed';
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}
