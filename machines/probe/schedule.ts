import type { ProbeOptions } from './options.js';
import type { ExchangeEnd } from './wire.js';

/**
 * Every deadline of `mcp-continuity probe`, decided here: how long each kind of exchange may take before
 * the probe gives up on it (or, for a cut, cuts it), and how a broken exchange is named. The I/O shell
 * (src/cli/probe/*) asks for a deadline, arms its one timer with it and reports whether it fired; the
 * wait before an evicted cursor is tried is `evictionWait` (./legacy-checks.ts).
 */

/** The kinds of exchange the probe makes, by how long it lets them run. */
export type ProbeExchange =
  /** A request whose answer the probe reads to its end (initialize, DELETE, a call, discover). */
  | 'request'
  /** A GET stream the probe holds open only until its first event (or the awaited answer) arrives. */
  | 'stream'
  /** A named call the probe means to cut: the deadline IS the cut. */
  | 'cut';

/** The options the deadlines follow. */
export type ProbeTiming = Pick<ProbeOptions, 'timeoutMs' | 'streamWaitMs' | 'cutAfterMs'>;

/**
 * How long an exchange of `kind` may run, in ms from sending it. `timeoutMs` bounds every exchange: a
 * stream wait or a cut longer than it is shortened to it, so `--timeout` is always the longest a single
 * request can hold the probe.
 */
export function exchangeDeadlineMs(o: ProbeTiming, kind: ProbeExchange): number {
  switch (kind) {
    case 'request':
      return o.timeoutMs;
    case 'stream':
      return Math.min(o.timeoutMs, o.streamWaitMs);
    case 'cut':
      return Math.min(o.timeoutMs, o.cutAfterMs);
  }
}

/**
 * How an exchange that broke off (no answer, or a body that stopped) ended: past its deadline it was the
 * probe's own doing ('timeout', a cut when one was meant); before it, the network's.
 */
export const brokenEnd = (deadlinePassed: boolean): ExchangeEnd => (deadlinePassed ? 'timeout' : 'network');
