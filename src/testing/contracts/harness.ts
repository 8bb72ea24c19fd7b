/**
 * The shape every contract suite of `mcp-continuity/testing` shares: a list of named cases, each an async
 * function that throws (a `node:assert` error) when the store under test breaks the contract. The suites
 * import no test framework, so the published package pulls none; `registerContract` hands the cases to
 * whichever one the caller uses (vitest, jest, mocha, `node:test`), or a script can run them in a loop.
 */

/** One rule of a contract, checked against a store built by the caller's factory. */
export interface ContractCase {
  /** What the store must do, as a sentence (the test's name). */
  readonly name: string;
  /** Resolves when the store keeps the rule; rejects with the first broken expectation. */
  readonly run: () => Promise<void>;
}

/** The part of a test framework `registerContract` uses: vitest's, jest's and mocha's globals fit it. */
export interface TestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>, timeoutMs?: number): void;
}

/**
 * Registers each case as one test under `describe(title)`. `timeoutMs` is passed to `it` (a real Redis or
 * Postgres on a busy machine can be slow; the cases themselves wait on nothing but the store).
 */
export function registerContract(
  api: TestApi,
  title: string,
  cases: readonly ContractCase[],
  timeoutMs = 30_000,
): void {
  api.describe(title, () => {
    for (const c of cases) api.it(c.name, c.run, timeoutMs);
  });
}

/** The names of the cases that failed, with their errors: for a script, or a test that a broken store fails. */
export async function failingCases(
  cases: readonly ContractCase[],
): Promise<Array<{ readonly name: string; readonly error: unknown }>> {
  const failed: Array<{ name: string; error: unknown }> = [];
  for (const c of cases) {
    try {
      await c.run();
    } catch (error) {
      failed.push({ name: c.name, error });
    }
  }
  return failed;
}

/**
 * A clock the suite moves by hand; stores under test read time only from `now`. It starts at the real time
 * (a store may hand a deadline to a server with its own clock, as Redis's PEXPIREAT does: a start in the
 * past would expire keys at once) and moves only when the suite says so.
 */
export class ContractClock {
  readonly T0 = Date.now();
  private t = this.T0;
  readonly now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
  set(t: number): void {
    this.t = t;
  }
}

/** Opens stores for one case and closes each exactly once. */
export interface StoreScope<S extends { close(): Promise<void> }> {
  /** Awaits the store and remembers it, so it is closed when the case ends (also when it throws). */
  open<T extends S>(store: T | Promise<T>): Promise<T>;
  /** Closes a store now (before its data is reopened); it is not closed again at the end. */
  close(store: S): Promise<void>;
}

/** Runs `body` with a scope whose stores are all closed afterwards, each once, newest first. */
export async function withStores<S extends { close(): Promise<void> }>(
  body: (scope: StoreScope<S>) => Promise<void>,
): Promise<void> {
  const opened: S[] = [];
  const scope: StoreScope<S> = {
    async open(store) {
      const s = await store;
      opened.push(s);
      return s;
    },
    async close(store) {
      const i = opened.indexOf(store);
      if (i >= 0) opened.splice(i, 1);
      await store.close();
    },
  };
  try {
    await body(scope);
  } finally {
    for (const s of opened.reverse()) await s.close();
  }
}
