import type { Attributes } from '@opentelemetry/api';
import type { Actor, AnyActorLogic, InspectionEvent, Subscription } from 'xstate';
import type { ListenGapFacts } from '../../machines/client/listen.machine.js';
import { isOutcomeUnknown } from '../client/outcome.js';
import { ClientMetric, ConventionMetric } from './names.js';
import type { Recorder } from './recorder.js';
import { clientSessionOf, SessionTimer } from './session-timer.js';
import { closeReasonOf, phaseOf, type StreamPhase } from './stream-phases.js';

/** Per stream actor: the phase last seen, and when its current outage began. */
interface StreamTrack {
  phase: StreamPhase;
  closedAt: number | undefined;
}

/** The stream machine's id (machines/client/stream.machine.ts): its actors are the ones timed. */
const STREAM_MACHINE_ID = 'stream';

/**
 * What a client transport records. It watches the client machine through XState's inspection API
 * (`actor.system.inspect`), so it sees exactly what the machines decided and changes nothing: the
 * `notifyGap` and `deliver` actions they execute (gaps, outcome-unknown settlements) and the states
 * each stream actor passes through (a close, a reconnect attempt, the next successful response).
 */
export class ClientMetrics {
  private readonly streams = new WeakMap<object, StreamTrack>();
  private readonly sessions: SessionTimer;
  private declared = false;

  constructor(
    private readonly recorder: Recorder,
    private readonly now: () => number,
  ) {
    this.sessions = new SessionTimer(recorder, ConventionMetric.clientSessionDuration, now);
  }

  /**
   * Called by `ContinuityClientTransport` before it starts its machine. Besides the continuity figures,
   * it times the machine's sessions (`mcp.client.session.duration`): from the session id's adoption to
   * its end (closed, terminated by the server, or lost: `error.type` `session_lost`).
   */
  watch(actor: Actor<AnyActorLogic>): Subscription {
    this.declare();
    this.recorder.declare(ConventionMetric.clientSessionDuration);
    let session: string | undefined;
    return actor.system.inspect((event: InspectionEvent) => {
      // Only the session machine itself runs `notifyGap` and `deliver`.
      if (event.type === '@xstate.action' && event.actorRef === actor)
        this.action(event.action.type, event.action.params);
      else if (event.type === '@xstate.microstep') this.microstep(event.actorRef, event.snapshot);
      else if (event.type === '@xstate.snapshot' && event.actorRef === actor)
        session = this.session(session, event.snapshot);
    });
  }

  /** A 2026-07-28 call's machine decided to re-issue (`continuityFetch`), for `reason`. */
  reissued(reason: string): void {
    this.declare();
    this.recorder.add(ClientMetric.reissues, 1, { reason });
  }

  /** A 2026-07-28 call ended (`continuityFetch`): its attempts, and an outcome unknown with its reason. */
  modernCallEnded(out: {
    readonly outcome: string;
    readonly reason: string;
    readonly attempts: number;
  }): void {
    this.declare();
    this.recorder.record(ClientMetric.callAttempts, out.attempts + 1);
    if (out.outcome === 'outcome-unknown')
      this.recorder.add(ClientMetric.outcomeUnknown, 1, { reason: out.reason });
  }

  /** A broken `subscriptions/listen` stream was re-opened (`reopeningListen`): what it missed. */
  listenGap(gap: ListenGapFacts): void {
    this.declare();
    this.recorder.add(ClientMetric.listenGaps, 1, { reason: gap.missed.kind });
    if (gap.missed.kind === 'exact') this.recorder.add(ClientMetric.listenMissedChanges, gap.missed.count);
    this.recorder.add(ClientMetric.listenReopenAttempts, gap.attempts);
  }

  /** The session machine's snapshot: the session it held may have ended, and another begun. */
  private session(held: string | undefined, snapshot: unknown): string | undefined {
    const s = snapshot as Parameters<typeof clientSessionOf>[0] & { context?: { protocolVersion?: unknown } };
    const { live, errorType } = clientSessionOf(s);
    if (live === held) return held;
    if (held !== undefined) {
      const attributes: Attributes = {};
      if (errorType !== undefined) attributes['error.type'] = errorType;
      const version = s.context?.protocolVersion;
      if (typeof version === 'string') attributes['mcp.protocol.version'] = version;
      this.sessions.ended(held, attributes);
    }
    if (live !== undefined) this.sessions.started(live);
    return live;
  }

  private declare(): void {
    if (this.declared) return;
    this.declared = true;
    for (const spec of Object.values(ClientMetric)) this.recorder.declare(spec);
  }

  /** The client session machine executed one of its I/O actions. */
  private action(type: string, params: unknown): void {
    if (type === 'notifyGap') {
      const gap = params as { reason: string; lostCount: number | null };
      this.recorder.add(ClientMetric.gaps, 1, { reason: gap.reason });
      if (gap.lostCount !== null) this.recorder.add(ClientMetric.lostEvents, gap.lostCount);
    } else if (type === 'deliver') {
      const message = (params as { message?: unknown }).message;
      if (isOutcomeUnknown(message)) {
        const error = (message as { error?: { data?: { reason?: unknown } } }).error;
        this.recorder.add(ClientMetric.outcomeUnknown, 1, {
          reason: String(error?.data?.reason ?? 'unknown'),
        });
      }
    }
  }

  /**
   * A stream actor changed state. A close is the move from connecting into `deciding`; a reconnect attempt
   * is the move back into connecting (from `backoff`, or at once after a gap); the outage ends with the
   * next successful response (`streaming`, or a complete answer). A stream that ends otherwise (given up,
   * session lost) records no latency.
   */
  private microstep(ref: object, snapshot: unknown): void {
    const s = snapshot as { machine?: { id?: string }; value?: unknown; context?: unknown };
    if (s.machine?.id !== STREAM_MACHINE_ID) return;
    const next = phaseOf(s.value);
    let track = this.streams.get(ref);
    if (!track) {
      // Every stream starts in connecting.awaitingResponse, whether or not that step was reported.
      track = { phase: 'awaiting', closedAt: undefined };
      this.streams.set(ref, track);
    }
    const prev = track.phase;
    if (prev === next) return;
    track.phase = next;
    const wasConnecting = prev === 'awaiting' || prev === 'streaming';
    if (next === 'deciding' && wasConnecting) {
      track.closedAt ??= this.now();
    } else if (next === 'awaiting' && (prev === 'deciding' || prev === 'backoff')) {
      this.recorder.add(ClientMetric.reconnectAttempts, 1, { reason: closeReasonOf(s.context) });
    } else if (next === 'streaming' || (next === 'done' && prev === 'awaiting')) {
      if (track.closedAt !== undefined) {
        this.recorder.record(ClientMetric.reconnectLatency, this.now() - track.closedAt);
        track.closedAt = undefined;
      }
    } else if (next === 'done' || next === 'ended') {
      track.closedAt = undefined;
    }
  }
}
