import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newTaskRecord } from '../../machines/tasks/task-decide.js';
import { planTaskListen, taskListenAck, taskNotices } from '../../machines/tasks/task-listen.js';
import type { TaskRecord } from '../../machines/tasks/task-record.js';

/** Rows for `notifications/tasks` over `subscriptions/listen` (machines/tasks/task-listen.ts), and a property. */
const T0 = 1_000_000;
const task = (taskId: string, over: Partial<TaskRecord> = {}): TaskRecord => ({
  ...newTaskRecord({
    taskId,
    principal: 'alice',
    fingerprint: 'f',
    request: { name: 'charge' },
    now: T0,
    ttlMs: 60_000,
    pollIntervalMs: 100,
    keepExpiredMs: 0,
  }),
  ...over,
});
const caps = {
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
const listen = (notifications: unknown, meta: unknown = caps) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'subscriptions/listen',
  params: { notifications, _meta: meta },
});

describe('task listens', () => {
  it('serves a listen for task ids alone; passes one that also asks for list changes, and anything else', () => {
    expect(planTaskListen(listen({ taskIds: ['a', 'a', 'b', 7] }))).toEqual({
      kind: 'serve',
      taskIds: ['a', 'b'],
    });
    expect(planTaskListen(listen({ taskIds: ['a'], toolsListChanged: true }))).toEqual({ kind: 'pass' });
    expect(planTaskListen(listen({ toolsListChanged: true }))).toEqual({ kind: 'pass' });
    expect(planTaskListen({ jsonrpc: '2.0', method: 'subscriptions/listen', params: {} })).toEqual({
      kind: 'pass',
    });
  });

  it('refuses task notifications to a client that did not declare the extension (-32021)', () => {
    expect(planTaskListen(listen({ taskIds: ['a'] }, {}))).toMatchObject({
      kind: 'refuse',
      error: { code: -32021 },
    });
  });

  it('acknowledges only the caller’s own, live tasks', () => {
    const records = new Map<string, TaskRecord | undefined>([
      ['mine', task('mine')],
      ['theirs', task('theirs', { principal: 'mallory' })],
      ['old', task('old', { createdAt: T0 - 120_000 })],
      ['gone', undefined],
    ]);
    expect(taskListenAck(['mine', 'theirs', 'old', 'gone'], records, 'alice', T0).taskIds).toEqual(['mine']);
  });

  it('a notice per new version: the DetailedTask without resultType; nothing for an unchanged task', () => {
    const first = taskNotices(new Map(), new Map([['a', task('a')]]));
    expect(first.notices).toHaveLength(1);
    expect(first.notices[0]).toMatchObject({
      method: 'notifications/tasks',
      params: { taskId: 'a', status: 'working' },
    });
    expect(first.notices[0]?.params).not.toHaveProperty('resultType');
    expect(taskNotices(first.sent, new Map([['a', task('a')]])).notices).toEqual([]);
    const done = task('a', { status: 'completed', result: { content: [] }, version: 2 });
    expect(taskNotices(first.sent, new Map([['a', done]])).notices[0]?.params).toMatchObject({
      status: 'completed',
      result: { content: [] },
    });
  });

  /** Property: whatever reads repeat, the notices are exactly the distinct versions, in order; the always-send mutant is caught. */
  const reads = fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 15 });
  const exact = (notices: typeof taskNotices) => (steps: number[]) => {
    let version = 1;
    let sent: ReadonlyMap<string, number> = new Map();
    const seen: number[] = [];
    for (const s of steps) {
      version += s;
      const n = notices(sent, new Map([['a', task('a', { version })]]));
      sent = n.sent;
      seen.push(...n.notices.map(() => version));
    }
    const versions = steps.map((_, i) => 1 + steps.slice(0, i + 1).reduce((x, y) => x + y, 0));
    const expected = versions.filter((v, i) => i === 0 || v !== versions[i - 1]);
    return JSON.stringify(seen) === JSON.stringify(expected);
  };
  const alwaysSends: typeof taskNotices = (_sent, records) => taskNotices(new Map(), records);

  it('holds: one notice per version', () => {
    fc.assert(fc.property(reads, exact(taskNotices)), { numRuns: 200, seed: 4 });
  });

  it('catches the mutant that sends every read', () => {
    expect(fc.check(fc.property(reads, exact(alwaysSends)), { numRuns: 200, seed: 4 }).failed).toBe(true);
  });
});
