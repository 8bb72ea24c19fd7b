import type { AnyActorRef } from 'xstate';
import { formatEventId, STANDALONE_STREAM } from '../event-id.js';
import type { ErrorReply } from './replies.js';
import type { ServerSessionEmitted, ServerSessionEvent, UnansweredCause } from './session.machine.js';
import type { SessionPlan } from './session-commands.js';

/** A step that is synchronous in the simulated world and asynchronous at run time. */
type Step = void | Promise<void>;

/**
 * The I/O a session plan is executed with: sockets, a log and timers in src/server/session.ts, a
 * simulated network, an in-memory log and a virtual clock in properties/world/server.ts. Nothing here
 * decides; {@link executePlan} runs the commands in order on it.
 */
export interface PlanIo<R, S> {
  readonly epoch: string;
  /** The machine hears of a use of the session (`session.activity`): its idle clock restarts. */
  recordActivity(): void;
  /** The request runs here (the SDK server's bookkeeping). */
  runHere(requestKey: string, stream: number): void;
  openStream(stream: number): Step;
  persist(): Step;
  /** The admitted request will not reach the SDK server: the machine settles it. */
  unanswered(requestKey: string, cause: UnansweredCause): void;
  /** The stream's head, for a plan that starts there. */
  head(stream: number): number | Promise<number>;
  reply(error: ErrorReply): R;
  /** Hands the accepted notification or response to the SDK server (202). */
  accepted(): R | Promise<R>;
  /** Answers with the stream a repeated request id was first given. */
  resume(lastEventId: string): R | Promise<R>;
  /** Opens an SSE response; `start` runs on it once it is open. */
  open(start: (sink: S) => Step): R;
  prime(sink: S, stream: number, seq: number): void;
  retry(sink: S): void;
  /** The response reading the stream now, if any. */
  readerOf(stream: number): S | undefined;
  /** Ends a reader's response (the client resumes, or has moved to another response). */
  endReader(stream: number, reader: S): void;
  /** The sink becomes the stream's reader; with `readBack`, it replays the log after `afterSeq`. */
  attach(sink: S, stream: number, afterSeq: number, readBack: boolean): Step;
  execute(requestKey: string): void;
}

/**
 * Executes a session plan (machines/server/session-commands.ts) on `io`, in order: its bookkeeping and
 * storage, then the error, the replay of a repeated request, or the response's commands. A request
 * admitted but never handed to the SDK server (its stream could not be stored, or its response failed
 * before `execute`) is settled as `failed`, or it would pin the session. Synchronous when `io` is.
 */
export function executePlan<R, S>(plan: SessionPlan, io: PlanIo<R, S>): R | Promise<R> {
  let admitted: string | undefined;
  const failed = (error: unknown): never => {
    if (admitted !== undefined) io.unanswered(admitted, 'failed');
    admitted = undefined;
    throw error;
  };
  // Once the SDK server has the request, its own answer (or its failure) settles it.
  const handedOver = () => {
    admitted = undefined;
  };
  const prepare = plan.prepare.map((c) => (): Step => {
    if (c.kind === 'record-activity') return io.recordActivity();
    if (c.kind === 'run-here') {
      admitted = c.requestKey;
      return io.runHere(c.requestKey, c.stream);
    }
    if (c.kind === 'open-stream') return io.openStream(c.stream);
    return io.persist();
  });
  let prepared: Step;
  try {
    prepared = inOrder(prepare);
  } catch (error) {
    return failed(error);
  }
  const then = () => answer(plan, io, handedOver, failed);
  return prepared instanceof Promise ? prepared.then(then, failed) : then();
}

function answer<R, S>(
  plan: SessionPlan,
  io: PlanIo<R, S>,
  handedOver: () => void,
  failed: (error: unknown) => never,
): R | Promise<R> {
  if (plan.kind === 'error') return io.reply(plan.error);
  if (plan.kind === 'accept') return io.accepted();
  if (plan.kind === 'resume') {
    return io.resume(formatEventId({ epoch: io.epoch, stream: plan.stream, seq: plan.seq }));
  }
  const { respond } = plan;
  const fromHead = respond.some(
    (c) => (c.kind === 'prime' && c.seq === 'head') || (c.kind === 'attach' && c.afterSeq === 'head'),
  );
  const open = (head: number) =>
    io.open((sink) => {
      const at = (seq: number | 'head') => (seq === 'head' ? head : seq);
      let steps: Step;
      try {
        steps = inOrder(
          respond.map((c) => (): Step => {
            if (c.kind === 'prime') return io.prime(sink, c.stream, at(c.seq));
            if (c.kind === 'retry') return io.retry(sink);
            if (c.kind === 'execute') {
              handedOver();
              return io.execute(c.requestKey);
            }
            // One reader per stream: a new one (the client reconnected) ends the previous.
            const previous = io.readerOf(c.stream);
            if (previous !== undefined && previous !== sink) io.endReader(c.stream, previous);
            return io.attach(sink, c.stream, at(c.afterSeq), c.readBack);
          }),
        );
      } catch (error) {
        return failed(error);
      }
      return steps instanceof Promise ? steps.then(undefined, failed) : steps;
    });
  if (!fromHead) return open(0);
  const head = io.head(STANDALONE_STREAM);
  return head instanceof Promise ? head.then(open) : open(head);
}

/** Runs the steps one after another, waiting only for those that are asynchronous. */
function inOrder(steps: ReadonlyArray<() => Step>, from = 0): Step {
  for (let i = from; i < steps.length; i++) {
    const step = steps[i] as () => Step;
    const done = step();
    if (done instanceof Promise) return done.then(() => inOrder(steps, i + 1));
  }
}

/** Sends `event` to a session machine and returns its answer of `type` (every decision is asked this way). */
export function askMachine<T extends ServerSessionEmitted['type']>(
  actor: Pick<AnyActorRef, 'send' | 'on'>,
  event: ServerSessionEvent,
  type: T,
): Extract<ServerSessionEmitted, { type: T }> {
  let answer: Extract<ServerSessionEmitted, { type: T }> | undefined;
  const sub = actor.on(type, (e: unknown) => {
    answer = e as Extract<ServerSessionEmitted, { type: T }>;
  });
  actor.send(event);
  sub.unsubscribe();
  if (!answer) throw new Error(`session machine gave no ${type} for ${event.type}`);
  return answer;
}
