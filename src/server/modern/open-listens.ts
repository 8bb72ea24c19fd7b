import { admitListen, type LimitAdmission, type ServerLimits } from '../../../machines/server/limits.js';

/**
 * The open 2026-07-28 `subscriptions/listen` streams of this process, per holder (principal, or remote
 * address without `authenticate`): the counts `admitListen` decides on. Each admitted stream holds one
 * slot until its response body ends or its client goes away.
 */
export class OpenListens {
  private total = 0;
  private readonly byHolder = new Map<string, number>();

  constructor(
    private readonly limits: Pick<
      ServerLimits,
      'maxListens' | 'maxListensPerPrincipal' | 'retryAfterSeconds'
    >,
  ) {}

  /** Admits a listen of `holder`: its slot's release (call once its stream is over), or the refusal. */
  open(
    holder: string,
  ): { readonly ok: true; readonly release: () => void } | Exclude<LimitAdmission, { ok: true }> {
    const admission = admitListen(
      { listens: this.total, listensOfHolder: this.byHolder.get(holder) ?? 0 },
      this.limits,
    );
    if (!admission.ok) return admission;
    this.total += 1;
    this.byHolder.set(holder, (this.byHolder.get(holder) ?? 0) + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.total -= 1;
        const n = (this.byHolder.get(holder) ?? 1) - 1;
        if (n > 0) this.byHolder.set(holder, n);
        else this.byHolder.delete(holder);
      },
    };
  }

  /** Open listens now, and how many holders have one (both go back to 0 once every stream ended). */
  stats(): { readonly open: number; readonly holders: number } {
    return { open: this.total, holders: this.byHolder.size };
  }
}

/**
 * The same response, whose body calls `release` once it ends, fails or is cancelled (the client went
 * away); a response without a body releases at once.
 */
export function releasingOnEnd(response: Response, release: () => void): Response {
  const body = response.body;
  if (body === null) {
    release();
    return response;
  }
  const reader = body.getReader();
  const relayed = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          release();
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        release();
        controller.error(error);
      }
    },
    async cancel(reason) {
      release();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(relayed, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
