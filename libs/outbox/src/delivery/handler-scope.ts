import type { QueryResult as PgResult } from 'pg';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { OutboxError, OutboxTransactionEndedError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { sqlState } from '../errors/sql-state';
import { inlineParameters, inlineStatement } from '../store/inline-statement';
import { handlerBound, handlerChecks, handlerContext, type SqlStatement } from '../store/sql';
import { queryWithPrefix, sendSimpleQuery } from '../store/simple-query';
import { errorText } from '../errors/error-text';
import { handlerSqlEffects } from './handler-sql';

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
  /** What restores the relay's context after a handler changed settings (see `resetSession`). */
  readonly restore: readonly SqlStatement[];
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
 * the same round trip as the handler's first query (and releases the previous handler's savepoint), so a
 * writing handler costs no round trip beyond its own queries — unless that query cannot be sent with its
 * values inlined (see `inlineParameters`), which then costs one.
 */
export class HandlerScope {
  private savepoint: string | null = null;
  private opening: Promise<void> | null = null;
  private settled = false;
  /** A query of this handler failed and no rollback to a savepoint of its own undid that since. */
  private failedQuery: unknown = null;
  private scopedManager: EntityManager | null = null;

  constructor(
    private readonly dataSource: DataSource,
    private readonly runner: QueryRunner,
    private readonly savepointName: string,
    private readonly consumer: string,
    private readonly index: number,
    readonly batch: BatchState,
    /** When the handler times out (epoch ms). */
    private readonly deadline: number,
  ) {}

  /**
   * The bound for a statement sent now: the handler's time left, but never under BOUND_FLOOR_MS, so that the
   * relay's own statements that follow the handler's last one in the same transaction (its next handler's
   * opening, the closing guard) are not cancelled for the handler's lack of time.
   */
  private remaining(): number {
    return Math.max(BOUND_FLOOR_MS, this.deadline - Date.now());
  }

  /** Until when a statement started now may run under the bound last set (epoch ms). */
  private boundEnds = 0;

  private noteBound(ms: number): void {
    this.boundEnds = Date.now() + ms;
  }

  /**
   * A query after the first one: sent with a new bound (`handlerBound`) in the same round trip when its values
   * can be inlined; else the bound goes in a round trip of its own first, only when the last one set would let
   * it run more than BOUND_FLOOR_MS past the handler's timeout.
   */
  private async later(target: QueryRunner, args: QueryArgs): Promise<unknown> {
    await this.open();
    const [query, parameters, structured] = args;
    const ms = this.remaining();
    const bound = inlineStatement(handlerBound(ms));
    const inlined =
      Array.isArray(parameters) || parameters === undefined ? inlineParameters(query, parameters) : null;
    if (inlined === null) {
      if (this.boundEnds - this.deadline > BOUND_FLOOR_MS) {
        await sendSimpleQuery(this.runner, bound);
        this.noteBound(ms);
      }
      return target.query(...(args as [string, unknown[]]));
    }
    this.noteBound(ms);
    return queryWithPrefix(
      this.runner,
      bound,
      query,
      parameters as unknown[] | undefined,
      inlined,
      structured,
    );
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
    await this.opening;
    if (this.failedQuery) throw this.failedQuery;
    if (depth(this.runner) !== 1) throw new OutboxError(messages.transactionLeftOpen(this.consumer));
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
    let results: PgResult[];
    try {
      results = await sendSimpleQuery(this.runner, inlineStatement(handlerChecks(this.batch.tenantSetting)));
    } catch (error) {
      if (sqlState(error) === NO_ACTIVE_TRANSACTION)
        throw new OutboxTransactionEndedError(messages.transactionEnded(this.consumer));
      throw new OutboxError(messages.deferredViolation(this.consumer, errorText(error)));
    }
    const seen = results[results.length - 1]!.rows[0] as { tenant: string | null; batch: string | null };
    if (seen.batch !== this.batch.marker)
      throw new OutboxTransactionEndedError(messages.transactionEnded(this.consumer));
    if (seen.tenant !== this.batch.tenantId) {
      throw new OutboxError(
        messages.tenantChanged(this.consumer, this.batch.tenantSetting, seen.tenant, this.batch.tenantId),
      );
    }
  }

  /** Marks a scope made after its handler returned: it has nothing to keep, and its queries fail. */
  settleUnused(): void {
    this.settled = true;
  }

  /** Undoes the handler's writes (rolls back to its savepoint, if any). */
  async rollback(): Promise<void> {
    this.settled = true;
    await this.opening?.catch(() => undefined);
    if (this.savepoint)
      await this.runner.query(`rollback to savepoint ${this.savepoint}; release savepoint ${this.savepoint}`);
    // nested transactions the handler left open went with its savepoint (none were made without one)
    setDepth(this.runner, 1);
  }

  /** Refuses what would end or leave the batch transaction: the handler fails, even when it catches this. */
  private refuse(what: string): Promise<never> {
    const error = new OutboxError(messages.transactionControl(this.consumer, what));
    this.failedQuery = error;
    return Promise.reject(error);
  }

  private async open(): Promise<void> {
    if (this.settled) throw new OutboxError(messages.managerAfterSettle(this.consumer));
    if (!this.opening) this.opening = this.openWith(null).then(() => undefined);
    await this.opening;
  }

  /**
   * The handler's first query: opens the savepoint (releasing the previous handler's) in the same round trip
   * when the query can be inlined, else in a round trip of its own before it.
   */
  private firstQuery(target: QueryRunner, args: QueryArgs): Promise<unknown> {
    if (this.settled) return Promise.reject(new OutboxError(messages.managerAfterSettle(this.consumer)));
    const [query, parameters, structured] = args;
    // named parameters (an object) are refused by the PostgreSQL driver itself: let it say so
    const inlined =
      Array.isArray(parameters) || parameters === undefined ? inlineParameters(query, parameters) : null;
    if (inlined === null) return this.open().then(() => target.query(...(args as [string, unknown[]])));
    const run = this.openWith({
      query,
      parameters: parameters as unknown[] | undefined,
      inlined,
      structured,
    });
    // Statements run in order: even when the query fails, the savepoint before it was made (the transaction is
    // healthy when a handler starts: the previous one's failure was rolled back to its savepoint).
    this.opening = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /**
   * Sends the handler's opening — the batch's context checked and set again (`handlerContext`), the previous
   * handler's savepoint released, this one's made — with its first query when given, in one round trip.
   */
  private async openWith(
    first: { query: string; parameters: unknown[] | undefined; inlined: string; structured?: boolean } | null,
  ): Promise<unknown> {
    const release = this.batch.pendingRelease ? `;\nrelease savepoint ${this.batch.pendingRelease}` : '';
    this.batch.pendingRelease = null;
    const ms = this.remaining();
    const context = inlineStatement(handlerContext(this.batch.tenantSetting, this.batch.tenantId, ms));
    this.noteBound(ms);
    // a handler before this one may have changed settings (or the role): reset them, then the relay's context
    const restore = this.batch.dirty
      ? this.batch.restore.map((r) => `;\n${inlineStatement(r)}`).join('')
      : '';
    this.batch.dirty = false;
    const prefix = `${context}${release}${restore};\nsavepoint ${this.savepointName}`;
    this.savepoint = this.savepointName;
    const previous = this.batch.last;
    this.batch.last = { index: this.index, consumer: this.consumer };
    const inspect = (results: PgResult[]): void => this.inspect(previous, results[0]!);
    try {
      if (first)
        return await queryWithPrefix(
          this.runner,
          prefix,
          first.query,
          first.parameters,
          first.inlined,
          first.structured,
          inspect,
        );
      inspect(await sendSimpleQuery(this.runner, prefix));
      return undefined;
    } catch (error) {
      // the previous handler's savepoint could not be released: that handler ended the batch transaction
      const cause = (error as { driverError?: unknown }).driverError ?? error;
      if (previous && release && sqlState(cause) === NO_ACTIVE_TRANSACTION) {
        this.batch.problem ??= {
          index: previous.index,
          error: new OutboxTransactionEndedError(messages.transactionEnded(previous.consumer)),
        };
      }
      throw error;
    }
  }

  /** Notes a problem when the previous handler left another tenant, or no batch marker (see `handlerContext`). */
  private inspect(previous: BatchState['last'], seen: PgResult): void {
    const row = seen.rows[0] as { tenant: string | null; batch: string | null };
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
   * A view of the batch's QueryRunner whose `query` first opens the savepoint. Its `manager` is kept on the
   * view so that TypeORM's EntityManager constructor does not replace the batch runner's own manager.
   */
  private scopedRunner(): QueryRunner {
    let manager: EntityManager | undefined;
    const scope = this;
    return new Proxy(this.runner, {
      get(target, property, receiver) {
        if (property === 'query') {
          return async (...args: QueryArgs) => {
            const { transactionControl: control, changesSettings } = handlerSqlEffects(String(args[0]));
            if (control !== null) return scope.refuse(`"${control}"`);
            try {
              const result = scope.opening
                ? await scope.later(target, args)
                : await scope.firstQuery(target, args);
              // The handler's own nested transaction rolled back after an error: the transaction is usable again.
              if (/^\s*rollback to savepoint/i.test(String(args[0]))) scope.failedQuery = null;
              return result;
            } catch (error) {
              scope.failedQuery = error;
              throw error;
            } finally {
              // after the query: the restore goes before the next handler's statements, not before this one
              if (changesSettings) scope.batch.dirty = true;
            }
          };
        }
        if (property === 'manager') return manager ?? target.manager;
        // Once the handler settled, report the runner as live so the next query reaches `open()` and fails
        // with our message, instead of TypeORM's about a released runner.
        if (property === 'isReleased' && scope.settled) return false;
        // The batch's own level belongs to the relay; nested levels (savepoints, e.g. of manager.transaction()) to
        // the handler.
        if (property === 'commitTransaction' || property === 'rollbackTransaction') {
          const nested = Reflect.get(target, property, receiver) as () => Promise<void>;
          return () =>
            depth(target) > 1 ? nested.call(receiver) : scope.refuse(`queryRunner.${String(property)}()`);
        }
        if (property === 'release') return () => scope.refuse('queryRunner.release()');
        return Reflect.get(target, property, receiver);
      },
      set(target, property, value) {
        if (property === 'manager') {
          manager = value as EntityManager;
          return true;
        }
        return Reflect.set(target, property, value);
      },
    });
  }
}

/** The shortest bound a handler's statement gets (see `HandlerScope.remaining`). */
const BOUND_FLOOR_MS = 50;

/** TypeORM's count of open transaction levels on a runner (protected; see `markTransaction` in the store). */
function depth(runner: QueryRunner): number {
  return (runner as QueryRunner & { transactionDepth: number }).transactionDepth;
}

function setDepth(runner: QueryRunner, value: number): void {
  (runner as QueryRunner & { transactionDepth: number }).transactionDepth = value;
}

/** What `QueryRunner.query` takes: a query, its parameters, and whether to answer with a `QueryResult`. */
type QueryArgs = [query: string, parameters?: unknown[] | object, structured?: boolean];
