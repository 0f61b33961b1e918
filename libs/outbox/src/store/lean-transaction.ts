import type { EntitySubscriberInterface, QueryRunner } from 'typeorm';
import type { RelayPolicy } from '../options/relay-policy';
import type { SqlStatement } from './sql';

/**
 * The batch transaction begun and committed by the relay's own statements instead of TypeORM's
 * `startTransaction()`/`commitTransaction()` (`RelayPolicy.leanTransactions`, docs/adr/1201-lean-batch-transactions.md),
 * and what keeps TypeORM's view of it right: its runner's record of the transaction, its logger, its
 * `afterTransactionCommit` subscribers. Used by `RoundConnection` only.
 */

/** The batch transaction's own begin and commit, as TypeORM writes them (see `leanBegin`). */
export const BATCH_BEGIN: SqlStatement = { text: 'START TRANSACTION', values: [] };
export const BATCH_COMMIT: SqlStatement = { text: 'COMMIT', values: [] };
/**
 * The claim's `commit` and the batch transaction's `START TRANSACTION` in one simple query (no parameters: a
 * text of two statements is sent as one Query message): one pg `Query`, its messages and its result fewer per
 * round than as two statements (issue 35). A `commit` that fails stops the text there: no batch transaction
 * begins, and the claim's failure rolls TypeORM's runner back (a `rollback` with none open is a warning).
 */
export const CLAIM_COMMIT_BATCH_BEGIN: SqlStatement = { text: `commit; ${BATCH_BEGIN.text}`, values: [] };

/** TypeORM's record of a runner's transaction (`BaseQueryRunner`), kept when the relay begins and commits itself. */
interface TypeOrmTransactionState {
  isTransactionActive: boolean;
  transactionDepth: number;
}

/** What a subscriber listens to that makes the relay leave the begin, or the commit, to TypeORM. */
const BEFORE_BEGIN: readonly (keyof EntitySubscriberInterface)[] = [
  'beforeTransactionStart',
  'afterTransactionStart',
  'beforeQuery',
  'afterQuery',
];
const BEFORE_COMMIT: readonly (keyof EntitySubscriberInterface)[] = [
  'beforeTransactionCommit',
  'beforeQuery',
  'afterQuery',
];
const AFTER_COMMIT: readonly (keyof EntitySubscriberInterface)[] = ['afterTransactionCommit'];

/**
 * True when a subscriber of the runner's DataSource listens to one of `events` (asked three times per batch:
 * loops, no closures).
 */
function listens(runner: QueryRunner, events: readonly (keyof EntitySubscriberInterface)[]): boolean {
  for (const subscriber of runner.connection.subscribers)
    for (const event of events) if (typeof subscriber[event] === 'function') return true;
  return false;
}

function leanTransactions(runner: QueryRunner, policy: RelayPolicy): boolean {
  return policy.leanTransactions && !runner.connection.options.isolationLevel;
}

/**
 * True when the batch transaction begins by the relay's own `begin`: no subscriber of the app's listens to a
 * transaction's start or to queries, and the app sets no isolation level TypeORM would add (the DataSource's
 * logger is told of it, as of TypeORM's). TypeORM's runner is told that its transaction is open, as its
 * `startTransaction()` leaves it (a handler's `manager.transaction()` makes a savepoint: see `markBegun`).
 */
export function leanBegin(runner: QueryRunner, policy: RelayPolicy): boolean {
  if (!leanTransactions(runner, policy) || runner.isTransactionActive) return false;
  return !listens(runner, BEFORE_BEGIN);
}

/**
 * TypeORM's runner told that its transaction is open, as `startTransaction()` leaves it, when the `begin` is
 * written (connected): a round trip that fails rolls back as after TypeORM's own.
 */
export function markBegun(runner: QueryRunner): void {
  const state = runner as unknown as TypeOrmTransactionState;
  state.isTransactionActive = true;
  state.transactionDepth = 1;
  // the DataSource's logger sees it as it saw TypeORM's own
  runner.connection.logger.logQuery(BATCH_BEGIN.text, undefined, runner);
}

/**
 * True when the batch transaction commits by the relay's own `commit`: no subscriber listens to a commit before
 * it happens or to queries, and TypeORM's runner holds one level of transaction (no savepoint a handler left
 * open). `markCommitted` then does what TypeORM's `commitTransaction()` does after it.
 */
export function leanCommit(runner: QueryRunner, policy: RelayPolicy): boolean {
  if (!leanTransactions(runner, policy)) return false;
  const state = runner as unknown as TypeOrmTransactionState;
  if (!state.isTransactionActive || state.transactionDepth !== 1) return false;
  return !listens(runner, BEFORE_COMMIT);
}

/**
 * TypeORM's runner told that its transaction committed, and its `afterTransactionCommit` subscribers: their
 * broadcast to wait for, or undefined when none listens (no async function around it: a promise less per batch).
 */
export function markCommitted(runner: QueryRunner): Promise<void> | undefined {
  const state = runner as unknown as TypeOrmTransactionState;
  state.isTransactionActive = false;
  state.transactionDepth = 0;
  return listens(runner, AFTER_COMMIT) ? runner.broadcaster.broadcast('AfterTransactionCommit') : undefined;
}
