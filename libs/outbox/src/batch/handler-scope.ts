/*
 * One file, on purpose (about 530 lines, most of them comments): `HandlerScope` is one handler's view of the batch
 * transaction, and every method reads or moves the same few pieces of state — the opening in flight, the
 * savepoint, whether the handler settled, its queries still running, its `TransactionControl` — whose order on
 * the one pipelined connection is the correctness argument (ADRs 0101, 0102, 0604, 1001). Split by role (opening,
 * bounds, checks, rollback), each part would take that state as parameters and the ordering would be argued
 * across files. What is not that state lives elsewhere already: the SQL in store/sql, the guard of transaction
 * control in transaction-control.ts, the statement-text reading in handler-sql.ts.
 */
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { OutboxError, OutboxStallError, OutboxTransactionEndedError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { sqlState } from '../errors/sql-state';
import {
  BATCH_SEAL_SQLSTATE,
  handlerBound,
  handlerChecks,
  handlerContext,
  type SqlStatement,
} from '../store/sql';
import { errorText } from '../errors/error-text';
import type { BatchWire } from '../store/outbox-store.port';
import { IN_HANDLER_SCOPE } from '../model/handler-scope-marker';
import { TransactionControl, type QueryArgs } from './transaction-control';
import type { HandlerSqlReader } from './handler-sql';

/** SQLSTATE `no_active_sql_transaction`: a savepoint command outside a transaction (a handler ended it). */
export const NO_ACTIVE_TRANSACTION = '25P01';

/** Something a handler did that the batch cannot be committed with; the relay runs the batch again without it. */
export interface BatchProblem {
  /** Index of the delivery (in the dispatched list) whose handler did it. */
  index: number;
  error: OutboxError;
}

/** State shared by the scopes of one batch transaction. */
export interface BatchState {
  /** A savepoint whose handler succeeded; released together with the next `savepoint` (or by the commit). */
  pendingRelease: string | null;
  readonly tenantSetting: string;
  readonly tenantId: string;
  /** The batch marker's value (the lease token; see `BATCH_MARKER`). */
  readonly marker: string;
  /** Check each handler as it returns (deferred constraints, tenant, marker), at one round trip per handler. */
  readonly careful: boolean;
  /**
   * Each handler that writes gets a savepoint, and its opening sets the batch's context again (`handlerContext`):
   * a failing handler is rolled back alone. Without (an optimistic run, ADR 1001), handlers share the batch
   * transaction as it is, the context is sent once, and a handler that fails after it sent a query asks for the
   * batch to run again (`rerun`). Always with `careful`.
   */
  readonly savepoints: boolean;
  /**
   * The `statement_timeout` in force on the batch's connection as the relay last set it, in ms; Infinity when
   * unknown (the relay's own bound, or a handler's statement that may have changed it or undone it). A handler's
   * statement gets a bound of its own when this one is more than `BOUND_SLACK_MS` away from its time left.
   */
  boundMs: number;
  /** An optimistic run must be rolled back and run again with savepoints: a handler failed after writing. */
  rerun: boolean;
  /** What restores the relay's context after a handler changed settings (see `resetSession`). */
  readonly restore: () => readonly SqlStatement[];
  /** Takes what must go first in the batch transaction's next round trip (the batch's context, once). */
  readonly takePending: () => SqlStatement[];
  /** The batch's seal (see `sealBatch`), until the first handler's opening sends it; then null. */
  seal: SqlStatement | null;
  /** The batch's connection, for the scope's own statements (see `BatchWire`). */
  readonly wire: () => Promise<BatchWire>;
  /** What `wire` gave, once a scope asked: the handlers after it reach it without an await. */
  wired: BatchWire | null;
  /** Cancels what the batch's session runs now (see `HandlerChannel.cancelRunning`). */
  readonly cancelRunning: (timeoutMs: number) => Promise<unknown>;
  /**
   * Waits for a round trip of the relay's on the batch's connection within its bound: the savepoint rolled back
   * or checked after a handler, which waits behind a query the handler left running (see `RoundConnection.bounded`).
   */
  readonly bounded: <T>(work: () => Promise<T>) => Promise<T>;
  /** A handler sent a statement that may change settings since the relay last restored its context. */
  dirty: boolean;
  /** The last handler that opened a savepoint: the next handler's first statement reads what it left. */
  last: { index: number; consumer: string } | null;
  /** First problem found; the relay does not commit the batch. */
  problem: BatchProblem | null;
}

/**
 * Gives one handler call an EntityManager inside the batch transaction, and opens a savepoint for it only when
 * the handler first sends a query. Handlers that never touch the database cost no round trip; those that do can
 * be rolled back alone when they throw, without undoing the other handlers of the batch. The savepoint goes in
 * the same round trip as the handler's first query (and releases the previous handler's savepoint): the relay's
 * statements are written on the pipelined connection first, then the handler's query, through TypeORM's own
 * `query()`, with its parameters bound — so a writing handler costs no round trip beyond its own queries.
 */
export class HandlerScope {
  private savepoint: string | null = null;
  private opening: Promise<void> | null = null;
  /** `opening` settled: nothing of the handler's is left to wait for on the connection (see `commit`). */
  private opened = false;
  /**
   * `opening` settled with nothing to throw again: the handler's next query goes out at once, without an await
   * on the opening (see `later`).
   */
  private ready = false;
  /** The handler's queries that wait for the opening (see `later`): one sent meanwhile goes behind them. */
  private queued = 0;
  private settled = false;
  private scopedManager: EntityManager | null = null;
  /** What the handler may not do to the batch transaction through its manager (see `TransactionControl`). */
  private readonly control: TransactionControl;
  /** The handler's queries sent through its manager and not answered yet (see `stopQueries`). */
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly runner: QueryRunner,
    private readonly savepointName: string,
    private readonly consumer: string,
    private readonly index: number,
    readonly batch: BatchState,
    /** When the handler times out (epoch ms). */
    private readonly deadline: number,
    /** Reads the handler's SQL (see `HandlerSqlReader`), shared by the dispatcher's scopes. */
    sql: HandlerSqlReader,
  ) {
    this.control = new TransactionControl(
      {
        refused: (what) => messages.transactionControl(consumer, what),
        leftOpen: () => messages.transactionLeftOpen(consumer),
      },
      (text) => sql.read(text),
    );
  }

  /** The batch's connection: the one a scope of the batch got already, else asked for (see `BatchState.wired`). */
  private wire(): BatchWire | Promise<BatchWire> {
    return (
      this.batch.wired ??
      this.batch.wire().then((wire) => {
        this.batch.wired = wire;
        return wire;
      })
    );
  }

  /**
   * The bound for a statement sent now: the handler's time left, but never under BOUND_FLOOR_MS, so that the
   * relay's own statements that follow the handler's last one in the same transaction (its next handler's
   * opening, the closing guard) are not cancelled for the handler's lack of time.
   */
  private remaining(): number {
    return Math.max(BOUND_FLOOR_MS, this.deadline - Date.now());
  }

  /**
   * A query after the first one: sent with a new bound (`handlerBound`) in the same round trip. Once the opening
   * is done and the batch's connection known, without an await before it is written (ADR 1202).
   */
  private later(target: QueryRunner, args: QueryArgs): Promise<unknown> {
    const wire = this.batch.wired;
    // not before a query the handler sent earlier that still waits for the opening: it would overtake it
    if (this.ready && !this.settled && wire !== null && this.queued === 0)
      return this.afterOpening(wire, target, args);
    this.queued++;
    let left = false;
    const leave = (): void => {
      if (!left) this.queued--;
      left = true;
    };
    return this.open()
      .then(async () => {
        let known: BatchWire;
        try {
          known = await this.wire();
        } finally {
          leave();
        }
        return this.afterOpening(known, target, args);
      })
      .finally(leave);
  }

  private afterOpening(wire: BatchWire, target: QueryRunner, args: QueryArgs): Promise<unknown> {
    // the handler ended the batch transaction past `context.manager` (its seal failed the commit, see
    // `sealBatch`): outside a transaction its statement would commit on its own
    if (!wire.inTransaction) {
      const ended = new OutboxTransactionEndedError(messages.transactionEnded(this.consumer));
      this.batch.problem ??= { index: this.index, error: ended };
      return Promise.reject(ended);
    }
    const bound = this.bound();
    if (bound.length === 0) return target.query(...(args as [string, unknown[]]));
    const sent = wire.send(bound);
    const query = target.query(...(args as [string, unknown[]]));
    query.catch(() => undefined);
    return sent.then(() => query);
  }

  /**
   * The statement that bounds the handler's next one by its time left, when the bound in force would end it more
   * than `BOUND_SLACK_MS` away from the handler's deadline — past it (a later query of a slow handler), or before
   * it (a bound an earlier handler with less time left set) — and none otherwise: a quick handler's queries all go
   * under the bound set when the batch's first one opened. Never under BOUND_FLOOR_MS, so that the relay's own
   * statements that follow the handler's last one in the same transaction (its next handler's opening, the
   * closing) are not cancelled for the handler's lack of time.
   */
  private bound(): SqlStatement[] {
    const now = Date.now();
    const ms = Math.max(BOUND_FLOOR_MS, this.deadline - now);
    if (Math.abs(this.batch.boundMs - ms) <= BOUND_SLACK_MS) return [];
    this.batch.boundMs = ms;
    return [handlerBound(ms)];
  }

  /** Notes a query of the handler's as running until it is answered (see `stopQueries`). */
  private running<T>(query: Promise<T>): Promise<T> {
    this.inFlight.add(query);
    const done = (): void => void this.inFlight.delete(query);
    query.then(done, done);
    return query;
  }

  /**
   * After the handler settled, before the relay writes anything more on the connection: a query of the handler's
   * still running past its deadline — its bound escaped, e.g. `set statement_timeout = 0` in the same text, or
   * in a query sent alongside — is cancelled by a cancel request (see `sendCancelRequest`), once the server's own
   * cancellation had `CANCEL_GRACE_MS` to arrive. Nothing of the relay's is on the connection meanwhile, so the
   * request can only stop the handler's query (or find the session idle, and do nothing). Costs nothing when no
   * query of the handler's is running, which is the rule.
   */
  private async stopQueries(): Promise<void> {
    if (this.inFlight.size === 0) return;
    const answered = Promise.allSettled([...this.inFlight]).then(() => true);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), Math.max(0, this.deadline + CANCEL_GRACE_MS - Date.now()));
    });
    const inTime = await Promise.race([answered, late]).finally(() => clearTimeout(timer));
    if (inTime) return;
    await this.batch.cancelRunning(CANCEL_REQUEST_TIMEOUT_MS);
  }

  /** The manager handed to the handler; created on first access. */
  get manager(): EntityManager {
    this.scopedManager ??= this.dataSource.createEntityManager(this.scopedRunner());
    return this.scopedManager;
  }

  /**
   * Keeps the handler's writes. Throws when one of its queries failed and it returned anyway: the transaction may
   * be aborted, and its writes are incomplete; the caller then rolls it back.
   */
  async commit(): Promise<void> {
    this.settled = true;
    if (this.inFlight.size > 0) await this.stopQueries();
    // a handler that returned without waiting for its first query: the wait is the relay's now, and bounded
    if (this.opening && !this.opened) await this.batch.bounded(() => this.opening!);
    this.control.settle();
    if (!this.savepoint) return;
    if (this.batch.careful) await this.check();
    this.batch.pendingRelease = this.savepoint;
  }

  /**
   * Careful mode (see `BatchState.careful`): the checks of `handlerChecks`, before the savepoint is released,
   * so what would fail the batch later fails this handler now, alone. Throws `OutboxTransactionEndedError` when
   * the batch transaction is gone.
   */
  private async check(): Promise<void> {
    const wire = await this.batch.wire();
    if (!wire.inTransaction) throw new OutboxTransactionEndedError(messages.transactionEnded(this.consumer));
    let results: unknown[][];
    try {
      results = await this.batch.bounded(() => wire.send(handlerChecks(this.batch.tenantSetting)));
    } catch (error) {
      if (error instanceof OutboxStallError) throw error;
      if (sqlState(error) === NO_ACTIVE_TRANSACTION)
        throw new OutboxTransactionEndedError(messages.transactionEnded(this.consumer));
      throw new OutboxError(messages.deferredViolation(this.consumer, errorText(error)));
    }
    const seen = results[results.length - 1]![0] as { tenant: string | null; batch: string | null };
    if (seen.batch !== this.batch.marker)
      throw new OutboxTransactionEndedError(messages.transactionEnded(this.consumer));
    if (seen.tenant !== this.batch.tenantId) {
      throw new OutboxError(
        messages.tenantChanged(this.consumer, this.batch.tenantSetting, seen.tenant, this.batch.tenantId),
      );
    }
  }

  /** The handler sent a statement (or its scope did, for it): it may have written in the batch transaction. */
  get sent(): boolean {
    return this.opening !== null;
  }

  /** Marks a scope made after its handler returned: it has nothing to keep, and its queries fail. */
  settleUnused(): void {
    this.settled = true;
  }

  /**
   * Undoes the handler's writes: closes the nested transactions it left open, through TypeORM (so its own
   * count of levels comes back to the batch's), then rolls back to the handler's savepoint, if any.
   */
  async rollback(): Promise<void> {
    this.settled = true;
    await this.stopQueries();
    // after a handler's timeout, this waits behind the query it left running (the server cancels it at the
    // handler's deadline): bounded, for a server that does not answer at all
    await this.batch.bounded(async () => {
      await this.opening?.catch(() => undefined);
      await this.control.closeNested(this.runner);
      if (this.savepoint)
        await this.runner.query(
          `rollback to savepoint ${this.savepoint}; release savepoint ${this.savepoint}`,
        );
    });
  }

  private async open(): Promise<void> {
    if (this.settled) throw new OutboxError(messages.managerAfterSettle(this.consumer));
    if (!this.opening)
      this.opening = this.openWith(null).then(
        () => {
          this.opened = true;
          this.ready = true;
        },
        (error: unknown) => {
          this.opened = true;
          throw error;
        },
      );
    await this.opening;
  }

  /** The handler's first query: sent in the round trip that opens the savepoint (see `openWith`). */
  private firstQuery(target: QueryRunner, args: QueryArgs): Promise<unknown> {
    if (this.settled) return Promise.reject(new OutboxError(messages.managerAfterSettle(this.consumer)));
    const run = this.openWith({ target, args });
    // Statements run in order: even when the query fails, the savepoint before it was made (the transaction is
    // healthy when a handler starts: the previous one's failure was rolled back to its savepoint).
    const opened = (): void => {
      this.opened = true;
      this.ready = true;
    };
    this.opening = run.then(opened, opened);
    return run;
  }

  /**
   * Sends the handler's opening — what the batch has pending (its context), the batch's context checked and
   * set again (`handlerContext`), the previous handler's savepoint released, this one's made — then its first
   * query when given, all in one round trip. Nothing is sent when the batch transaction is gone (a previous
   * handler ended it behind the relay's back): outside a transaction each statement would commit on its own.
   */
  private openWith(first: { target: QueryRunner; args: QueryArgs } | null): Promise<unknown> {
    const previous = this.batch.last;
    const wire = this.wire();
    if (wire instanceof Promise) return wire.then((known) => this.openOn(known, previous, first));
    return this.openOn(wire, previous, first);
  }

  /**
   * `openWith` on the batch's connection. When the opening has no statement (an optimistic run's handler after
   * the first, its bound in force), the query goes out as it is, with no promise of the scope's around it.
   */
  private openOn(
    wire: BatchWire,
    previous: BatchState['last'],
    first: { target: QueryRunner; args: QueryArgs } | null,
  ): Promise<unknown> {
    if (!wire.inTransaction) {
      const ended = new OutboxTransactionEndedError(
        messages.transactionEnded(previous?.consumer ?? this.consumer),
      );
      if (previous) this.batch.problem ??= { index: previous.index, error: ended };
      return Promise.reject(ended);
    }
    const release = this.batch.pendingRelease;
    this.batch.pendingRelease = null;
    const ms = this.remaining();
    const pending = this.batch.takePending();
    if (this.batch.seal !== null) {
      pending.push(this.batch.seal);
      this.batch.seal = null;
    }
    /** Where the context's check answers, after what was pending. */
    const checked = pending.length;
    // With savepoints, every opening checks and sets the batch's context; in an optimistic run only one that
    // follows a handler that may have changed settings (the closing's guard finds any other change, and the
    // batch then runs again in careful parts).
    const context = this.batch.savepoints || this.batch.dirty;
    const statements: SqlStatement[] = pending;
    if (context) {
      statements.push(
        handlerContext(this.batch.tenantSetting, this.batch.tenantId, ms),
        // a handler before this one may have changed settings (or the role): reset them, then the relay's
        // context, then this handler's bound again (the relay's context bounds statements by relay.leaseMs)
        ...(this.batch.dirty ? [...this.batch.restore(), handlerBound(ms)] : []),
      );
      this.batch.boundMs = ms;
    } else {
      statements.push(...this.bound());
    }
    if (this.batch.savepoints) {
      // no parameters: one simple-protocol query for both
      statements.push({
        text: `${release ? `release savepoint ${release}; ` : ''}savepoint ${this.savepointName}`,
        values: [],
      });
      this.savepoint = this.savepointName;
    }
    this.batch.dirty = false;
    this.batch.last = { index: this.index, consumer: this.consumer };
    if (statements.length === 0)
      return first ? first.target.query(...(first.args as [string, unknown[]])) : Promise.resolve(null);
    const sent = wire.send(statements);
    const query = first ? first.target.query(...(first.args as [string, unknown[]])) : null;
    query?.catch(() => undefined);
    return sent.then(
      (results) => {
        if (context) this.inspect(previous, results[checked]!);
        return query;
      },
      async (error: unknown) => {
        // the previous handler's savepoint could not be released: that handler ended the batch transaction
        if (previous && release && sqlState(error) === NO_ACTIVE_TRANSACTION) {
          this.batch.problem ??= {
            index: previous.index,
            error: new OutboxTransactionEndedError(messages.transactionEnded(previous.consumer)),
          };
        }
        await query?.catch(() => undefined);
        throw error;
      },
    );
  }

  /** Notes a problem when the previous handler left another tenant, or no batch marker (see `handlerContext`). */
  private inspect(previous: BatchState['last'], seen: unknown[]): void {
    const row = seen[0] as { tenant: string | null; batch: string | null };
    if (previous === null || this.batch.problem) return;
    if (row.batch !== this.batch.marker) {
      this.batch.problem = {
        index: previous.index,
        error: new OutboxTransactionEndedError(messages.transactionEnded(previous.consumer)),
      };
    } else if (row.tenant !== this.batch.tenantId) {
      this.batch.problem = {
        index: previous.index,
        error: new OutboxError(
          messages.tenantChanged(
            previous.consumer,
            this.batch.tenantSetting,
            row.tenant,
            this.batch.tenantId,
          ),
        ),
      };
    }
  }

  /**
   * A view of the batch's QueryRunner, guarded (see `TransactionControl`), whose `query` first opens the
   * savepoint.
   */
  private scopedRunner(): QueryRunner {
    return this.control.view(this.runner, {
      send: (target, args, changesSettings) => {
        // after the query: the restore goes before the next handler's statements, not before this one; the
        // bound in force is unknown from now on (the query may have set statement_timeout)
        const after = (): void => {
          if (changesSettings) {
            this.batch.dirty = true;
            this.batch.boundMs = Number.POSITIVE_INFINITY;
          } else if (ROLLBACK_TO_SAVEPOINT.test(String(args[0]))) {
            // a handler's own nested transaction rolled back (manager.transaction()): a bound sent inside it is undone
            this.batch.boundMs = Number.POSITIVE_INFINITY;
          }
        };
        return this.running(this.opening ? this.later(target, args) : this.firstQuery(target, args)).then(
          (result) => {
            after();
            return result;
          },
          (error: unknown) => {
            after();
            // the batch's seal fired before the relay's commit (see `sealBatch`): no commit comes through the
            // view, so it was a check of every deferred constraint
            if (sqlState(error) === BATCH_SEAL_SQLSTATE)
              throw new OutboxError(messages.sealChecked(this.consumer));
            throw error;
          },
        );
      },
      property: (property) => {
        if (property === IN_HANDLER_SCOPE) return { value: true };
        // Once the handler settled, report the runner as live so the next query reaches `open()` and fails
        // with our message, instead of TypeORM's about a released runner.
        if (property === 'isReleased' && this.settled) return { value: false };
        return undefined;
      },
    });
  }
}

/** A handler's statement that undoes what was set since one of its own savepoints, the bound among it. */
const ROLLBACK_TO_SAVEPOINT = /^\s*rollback\s+to\s/i;

/** The shortest bound a handler's statement gets (see `HandlerScope.remaining`). */
const BOUND_FLOOR_MS = 50;

/**
 * How far past its handler's deadline the bound in force may let a statement run before the relay sends a new one
 * (see `HandlerScope.bound`): a handler's queries sent within this of its opening need no bound of their own. A
 * query still running past the deadline is cancelled after `CANCEL_GRACE_MS` anyway (see `stopQueries`).
 */
const BOUND_SLACK_MS = 50;

/**
 * How long after a handler's deadline the relay waits for its running query to end by the server's bound
 * before it cancels the query itself (see `HandlerScope.stopQueries`): past the bound's floor, so a query
 * sent just before the deadline ends on its own first.
 */
const CANCEL_GRACE_MS = 2 * BOUND_FLOOR_MS;

/** How long a cancel request may take to be delivered (it is one packet on a connection of its own). */
const CANCEL_REQUEST_TIMEOUT_MS = 1_000;
