/**
 * When a slow SSE reader is cut, decided once for every writer: the Web writer (`toResponse`'s
 * `WebSink`, whose queue is the stream's) and both Node writers (`writeNodeReply`, which writes a Reply
 * straight to the socket, and `writeNodeResponse`, which writes a Web `Response`; their queue is the
 * socket's buffer, src/server/node-cut.ts). The shells report how many bytes the reader has not taken
 * and execute the verdict; they keep no bound or deadline of their own.
 *
 * Why cut at all: every event is in the log before it is written, so a reader that falls too far behind
 * loses nothing by having its response ended; it resumes with Last-Event-ID. Without the cut the server
 * would buffer a whole stream for one reader that does not read.
 */

/** What a writer does once a frame has been handed on. */
export type WriteVerdict = 'go-on' | 'cut';

/**
 * A frame has been handed on and its reader has `untakenBytes` it has not taken (Node: the socket's
 * unsent bytes, asked after each write; Web: the stream's queue, asked before the next frame joins it).
 * Past `maxBufferedBytes` the reader is too slow: no further frame is queued, and the response ends after
 * what is. The frame that crossed the bound is still written whole, so every response makes progress
 * even when one frame is larger than the bound.
 */
export function writeVerdict(untakenBytes: number, maxBufferedBytes: number): WriteVerdict {
  return untakenBytes > maxBufferedBytes ? 'cut' : 'go-on';
}

/** What a writer does once it has ended its response. */
export type EndPlan =
  | { readonly kind: 'done' }
  /** Wait up to `withinMs` for the socket to send what it holds; if it does not, destroy it. */
  | { readonly kind: 'drain-or-destroy'; readonly withinMs: number };

/**
 * The response has ended (`end()` was called). A reader that was not cut, or a cut one whose socket
 * already sent everything, needs nothing more. A cut reader with bytes still unsent gets `stallMs` to
 * take them: it is known to be slow, and one that takes nothing at all must not hold the socket (and its
 * buffer) forever.
 */
export function afterEnd(cut: boolean, unsentBytes: number, stallMs: number): EndPlan {
  return cut && unsentBytes > 0 ? { kind: 'drain-or-destroy', withinMs: stallMs } : { kind: 'done' };
}
