import type { ServerResponse } from 'node:http';
import { afterEnd, writeVerdict } from '../../machines/server/slow-reader.js';
import type { WakePort } from './wake-port.js';

/**
 * The slow-reader cut of one Node response, as machines/server/slow-reader.ts decides it. Both Node
 * writers (`writeNodeReply`, `writeNodeResponse`) write through it, so the bound and the drain deadline
 * are the machine's, asked in one place: this shell only reports the socket's unsent bytes and carries
 * out the verdict.
 */
export class NodeCut {
  /** The reader was found too slow: its source is no longer read. */
  cut = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly maxBufferedBytes: number,
  ) {}

  /** Writes `chunk`; true when the reader is now cut (the caller stops reading its source). */
  write(chunk: Uint8Array | string): boolean {
    this.res.write(chunk);
    if (writeVerdict(this.res.writableLength, this.maxBufferedBytes) === 'cut') this.cut = true;
    return this.cut;
  }

  /** Ends the response; a cut reader that then takes nothing for `stallMs` has its socket destroyed. */
  async end(stallMs: number, wakes: WakePort): Promise<void> {
    const res = this.res;
    if (res.destroyed) return;
    res.end();
    const plan = afterEnd(this.cut, res.writableLength, stallMs);
    if (plan.kind === 'drain-or-destroy' && !(await drained(res, plan.withinMs, wakes))) res.destroy();
  }
}

/** Resolves true when `res` has written everything, false when it closes first or takes nothing for `ms`. */
function drained(res: ServerResponse, ms: number, wakes: WakePort): Promise<boolean> {
  return new Promise((resolve) => {
    const settle = (ok: boolean) => {
      timer.cancel();
      res.off('finish', onFinish);
      res.off('close', onClose);
      resolve(ok);
    };
    const onFinish = () => settle(true);
    const onClose = () => settle(res.writableFinished);
    const timer = wakes.after(ms, () => settle(false));
    res.on('finish', onFinish);
    res.on('close', onClose);
  });
}
