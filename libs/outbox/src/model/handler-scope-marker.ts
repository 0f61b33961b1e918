import type { QueryRunner } from 'typeorm';

/**
 * True on the QueryRunner a handler's `context.manager` runs on (see `scopedRunner`): the relay's batch
 * transaction, whose savepoints the relay rolls back itself. An `enqueue` there sends its insert unnamed, through
 * that runner, which opens the handler's savepoint in the same round trip (see `EnqueueInserts`).
 */
export const IN_HANDLER_SCOPE = Symbol('outbox.inHandlerScope');

/** True when `runner` is a handler's `context.manager` runner (see `IN_HANDLER_SCOPE`). */
export function inHandlerScope(runner: QueryRunner): boolean {
  return (runner as QueryRunner & { [IN_HANDLER_SCOPE]?: boolean })[IN_HANDLER_SCOPE] === true;
}
