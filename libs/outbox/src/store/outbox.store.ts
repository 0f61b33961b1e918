import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OUTBOX_RELAY_POLICY, type RelayPolicy } from '../options/relay-policy';
import type { OutboxRelayStall, OutboxRoundTrip } from '../model/outbox-relay-stall.interface';
import { ListenConnection, type ListenHandlers } from './listen-connection';
import { pgConnection } from './pipeline';
import { PreparedStatements } from './prepared-statements';
import { pipelinedCommands, pipelinedTransaction, type RelayTransport, type Step } from './pipelined-steps';
import { RoundConnection } from './round-connection';
import { RoundTripDeadline } from './round-trip-deadline';
import { relayBound, type SqlStatement } from './sql';
import { resetSessionBound, sessionBound } from './sql/session-bound';

export { PREPARED_STATEMENT_MISSING, type Step } from './pipelined-steps';
export { RoundConnection } from './round-connection';
export type { ListenConnection, ListenHandlers } from './listen-connection';

/** The one place that runs SQL: finds the app's DataSource and executes statements from `store/sql`. */
@Injectable()
export class OutboxStore {
  private resolved: DataSource | undefined;
  private readonly transport: RelayTransport;

  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_RELAY_POLICY) policy: RelayPolicy,
  ) {
    this.transport = {
      prepared: new PreparedStatements(policy.namedStatements, options.names),
      policy,
      names: options.names,
      tenantSetting: options.tenantSetting,
      leaseMs: options.relay.leaseMs,
      deadline: new RoundTripDeadline(options.relay.roundTripTimeoutMs),
    };
  }

  /** The latest round trip of the relay that got no reply in time (see `RoundTripDeadline`), or null. */
  get stall(): OutboxRelayStall | null {
    return this.transport.deadline.stall;
  }

  /** True from a stall until a round trip begun after it is answered. */
  get stalled(): boolean {
    return this.transport.deadline.stalled;
  }

  /** The app's TypeORM DataSource; throws a message naming the import to add when there is none. */
  dataSource(): DataSource {
    if (!this.resolved) {
      try {
        this.resolved = this.moduleRef.get<DataSource>(getDataSourceToken(this.options.dataSource), {
          strict: false,
        });
      } catch {
        throw new OutboxError(messages.missingDataSource(this.options.dataSource));
      }
    }
    return this.resolved;
  }

  /** Runs a statement on a query runner and returns its rows (for every kind of statement). */
  async rows<T>(runner: QueryRunner, statement: SqlStatement): Promise<T[]> {
    const result = await runner.query(statement.text, statement.values, true);
    return result.records as T[];
  }

  /**
   * Runs `work` in a transaction of its own on a pooled connection, releasing the connection afterwards. With
   * `bound`, a wait of the relay's: bounded on the client side as a whole (see `RoundTripDeadline`).
   */
  async transaction<T>(
    work: (runner: QueryRunner) => Promise<T>,
    bound?: { trip: OutboxRoundTrip; tenantId: string | null },
  ): Promise<T> {
    const runner = this.dataSource().createQueryRunner();
    const run = async (): Promise<T> => {
      if (bound) await this.transport.deadline.connect(runner);
      await runner.startTransaction();
      const result = await work(runner);
      await runner.commitTransaction();
      return result;
    };
    try {
      return await (bound ? this.transport.deadline.within(runner, bound.trip, bound.tenantId, run) : run());
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Runs statements as one transaction in a single round trip — `begin; …; commit` written together on the
   * connection in pg's pipeline mode, values bound — and returns each statement's rows, in order. A `null` in
   * the list is a statement this transaction does not need: it is not sent, and its rows are `[]`. For the
   * relay, whose short transactions would otherwise spend most of their time waiting for `begin`, `set_config`
   * and `commit`. A failed statement aborts the transaction, and the `commit` after it rolls back. With
   * `bound`, a round trip of the relay's: bounded on the client side (see `RoundTripDeadline`).
   */
  async atomically(
    statements: readonly Step[],
    bound?: { trip: OutboxRoundTrip; tenantId: string | null },
  ): Promise<unknown[][]> {
    const runner = this.dataSource().createQueryRunner();
    const run = async (): Promise<unknown[][]> => {
      const connection = bound ? await this.transport.deadline.connect(runner) : await pgConnection(runner);
      return pipelinedTransaction(this.transport, connection, statements);
    };
    try {
      return await (bound ? this.transport.deadline.within(runner, bound.trip, bound.tenantId, run) : run());
    } finally {
      await runner.release();
    }
  }

  /**
   * Runs one statement of the relay's in a transaction of its own, under the relay's statement bound
   * (`relay.leaseMs`, not the role's or the database's `statement_timeout`), without JIT (`relayBound`), and under
   * its client-side bound; returns its rows.
   */
  async relayQuery<T>(statement: SqlStatement, trip: OutboxRoundTrip): Promise<T[]> {
    const [, rows] = await this.atomically([relayBound(this.transport.leaseMs), statement], {
      trip,
      tenantId: null,
    });
    return rows as T[];
  }

  /**
   * Runs one statement of the relay's that cannot run in a transaction (`VACUUM`) under the relay's statement
   * bound, set for the session in the same round trip and reset after it, and its client-side one.
   */
  async relayCommand(statement: SqlStatement, trip: OutboxRoundTrip): Promise<void> {
    const runner = this.dataSource().createQueryRunner();
    try {
      await this.transport.deadline.within(runner, trip, null, async () => {
        const connection = await this.transport.deadline.connect(runner);
        // each its own implicit transaction: the reset runs after a failure too
        await pipelinedCommands(
          connection,
          [sessionBound(this.transport.leaseMs), statement, resetSessionBound()],
          this.transport.policy.oneWrite,
        );
      });
    } finally {
      await runner.release();
    }
  }

  /** A pooled connection held for one relay round of `tenantId` (see `RoundConnection`); release it when done. */
  round(tenantId: string): RoundConnection {
    return new RoundConnection(this.dataSource().createQueryRunner(), this.transport, tenantId);
  }

  /**
   * A connection of its own that LISTENs for wake-ups, of the pool's `Client` class and options (not connected
   * yet: call `listen()`).
   */
  listenConnection(handlers: ListenHandlers): ListenConnection {
    return new ListenConnection(this.dataSource(), handlers, this.transport.deadline);
  }

  /**
   * Sends a wake-up (`notifyWakeup`) on a pooled connection, straight through the DataSource's `pg` pool: a
   * statement in an implicit transaction of its own needs none of a QueryRunner's bookkeeping, a sixth of what the
   * NOTIFY costs Node alone (ADR 1004). The DataSource's logger still sees it.
   */
  async notify(statement: SqlStatement): Promise<void> {
    const dataSource = this.dataSource();
    const pool = (dataSource.driver as unknown as { master?: Pool }).master;
    if (typeof pool?.query !== 'function') {
      await this.query(statement);
      return;
    }
    dataSource.logger.logQuery(statement.text, statement.values);
    await pool.query(statement.text, statement.values);
  }

  /**
   * Runs one statement outside any transaction of the app. With `trip`, a wait of the library's own in the
   * background (retention, a metrics scrape): bounded on the client side (see `RoundTripDeadline`).
   */
  async query<T>(statement: SqlStatement, trip?: OutboxRoundTrip): Promise<T[]> {
    const runner = this.dataSource().createQueryRunner();
    try {
      if (!trip) return await this.rows<T>(runner, statement);
      return await this.transport.deadline.within(runner, trip, null, async () => {
        await this.transport.deadline.connect(runner);
        return this.rows<T>(runner, statement);
      });
    } finally {
      await runner.release();
    }
  }
}
