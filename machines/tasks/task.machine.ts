import { setup, transition } from 'xstate';

/**
 * The status of one task of the MCP tasks extension (`io.modelcontextprotocol/tasks`,
 * ../shared/reference/mcp-tasks-extension-draft.md, "Task Status"): working ⇄ input_required, then one
 * terminal status (completed, failed, cancelled) that nothing leaves. A run's late outcome after a cancel,
 * or a second outcome, is therefore ignored here, not by the store or the runtime.
 *
 * The runtime keeps no actor per task: a task lives in a store (memory, SQLite, Redis) and is served by
 * any instance, so each change resolves the stored status and takes one transition (`stepTaskStatus`).
 */
export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

export type TaskEvent =
  /** The run answered `resultType: "input_required"` (an MRTR round): the client must answer it. */
  | { type: 'run.inputRequired' }
  /** Every outstanding input request of the round was answered (`tasks/update`): the run goes on. */
  | { type: 'input.complete' }
  /** The run answered a result (also a tool result with `isError: true`). */
  | { type: 'run.completed' }
  /** The run answered a JSON-RPC error, or died without an answer. */
  | { type: 'run.failed' }
  /** `tasks/cancel` from the task's principal. */
  | { type: 'cancel' };

export const taskMachine = setup({
  types: { events: {} as TaskEvent },
}).createMachine({
  id: 'task',
  initial: 'working',
  states: {
    working: {
      on: {
        'run.inputRequired': 'input_required',
        'run.completed': 'completed',
        'run.failed': 'failed',
        cancel: 'cancelled',
      },
    },
    input_required: {
      on: {
        'input.complete': 'working',
        // No run is going on while input is awaited, but a run that died (its instance) still fails it.
        'run.failed': 'failed',
        cancel: 'cancelled',
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

/** Terminal statuses: the task's answer is fixed. */
export const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'cancelled']);

/** The status after `event` from `status`, and whether it changed (an event a status ignores changes nothing). */
export function stepTaskStatus(
  status: TaskStatus,
  event: TaskEvent,
): { readonly status: TaskStatus; readonly changed: boolean } {
  const snapshot = taskMachine.resolveState({ value: status, context: {} });
  const [next] = transition(taskMachine, snapshot, event);
  const value = next.value as TaskStatus;
  return { status: value, changed: value !== status };
}
