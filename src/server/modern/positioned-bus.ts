import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';
import {
  createListenLog,
  type ListenAttemptFacts,
  type ListenLog,
  type ListenLogLimits,
  publishChange,
  streamSubscribed,
} from '../../../machines/server/listen-log.js';
import type { InspectOption } from '../../inspect/keyed-mirror.js';
import { ListenLogInspection } from '../../inspect/listen-log-mirror.js';

/** One listen request in flight: what it said, and (once the SDK subscribed it) the head it started at. */
export type ListenAttempt = { -readonly [K in keyof ListenAttemptFacts]: ListenAttemptFacts[K] };

type Listener = (event: ServerEvent) => void;

/**
 * The v2 SDK's `ServerEventBus` for the endpoint, over the listen log (machines/server/listen-log.ts):
 * `publish` records each change and delivers it; a listener that the SDK's listen router registers while
 * serving a request that declared the extension gets every change with its position in `_meta` (the SDK
 * forwards an event's params onto the notification), and the head at that moment is noted on the request.
 *
 * The request is known through `AsyncLocalStorage`: the SDK subscribes inside its own handler, several
 * awaits after the request arrived, and only the request's async context links the two. A listener
 * registered outside `within` (none today) gets the changes without positions.
 */
export class PositionedEventBus implements ServerEventBus {
  readonly log: ListenLog;
  /** The inspector's mirror of the log, when an inspector is given. */
  readonly inspection: ListenLogInspection | undefined;
  readonly #listeners = new Set<{ listener: Listener; positions: boolean }>();
  readonly #attempts = new AsyncLocalStorage<ListenAttempt>();

  constructor(
    readonly limits: ListenLogLimits,
    private readonly now: () => number,
    private readonly onError: (error: unknown) => void,
    /** Names this run's log; random, so a restarted or another instance never vouches for our positions. */
    epoch: string = randomBytes(9).toString('base64url'),
    /** An inspector for the log (`ModernOptions.inspect`): a mirror actor is told what the log does. */
    inspect?: InspectOption,
  ) {
    this.log = createListenLog(epoch);
    this.inspection = inspect && new ListenLogInspection(inspect, this.log, limits);
  }

  publish(event: ServerEvent): void {
    const { positionedParams } = publishChange(this.log, event, this.now(), this.limits);
    this.inspection?.published(this.log);
    const positioned: ServerEvent = { ...event, params: positionedParams } as ServerEvent;
    // A snapshot: a listener that unsubscribes (its stream closed) while this runs does not skip another.
    for (const entry of [...this.#listeners]) {
      try {
        entry.listener(entry.positions ? positioned : event);
      } catch (error) {
        this.onError(error);
      }
    }
  }

  subscribe(listener: Listener): () => void {
    const attempt = this.#attempts.getStore();
    const { subscribedAt, positions } = streamSubscribed(this.log, attempt);
    if (attempt !== undefined) attempt.subscribedAt = subscribedAt;
    const entry = { listener, positions };
    this.#listeners.add(entry);
    return () => {
      this.#listeners.delete(entry);
    };
  }

  /** Runs the SDK's handling of one listen request with `attempt` as its context. */
  within<T>(attempt: ListenAttempt, serve: () => T): T {
    return this.#attempts.run(attempt, serve);
  }

  /** Open listeners (tests: nothing outlives its stream). */
  get listenerCount(): number {
    return this.#listeners.size;
  }
}
