import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OutboxError, OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxDedupe, OutboxEnqueueOutcome, OutboxEventInput } from '../model/outbox-event.interface';
import type { OutboxEnqueueInput, OutboxEventName } from '../model/outbox-event-map.interface';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import * as q from '../store/sql';
import { SINGLE_TENANT_ID } from '../model/outbox.constants';
import { validateEvent, type ValidatedEvent } from '../model/event-validation';
import { OutboxWakeup, type CarriedWakeup } from './outbox-wakeup';
import { OutboxSchemaRegistry } from '../events/outbox-schema.registry';
import { AmbientTransactions } from '../cls/ambient-transactions';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import { EnqueueInserts } from '../store/named-query';
import { inHandlerScope } from '../model/handler-scope-marker';
import { enqueueKeyed } from './keyed-enqueue';
import { EventIds } from '../model/event-id';

/** An event without an idempotency key: `enqueue` returns its id. */
type Unkeyed = { dedupe?: undefined };
/** An event with an idempotency key: `enqueue` returns an `OutboxEnqueueOutcome`. */
type Keyed = { dedupe: OutboxDedupe };
/** An event whose type does not say: `enqueue` returns either. */
type MaybeKeyed = { dedupe?: OutboxDedupe };

/** The transaction `enqueue` writes in: its EntityManager, or a QueryRunner after `startTransaction()`. */
export type OutboxTransaction = EntityManager | QueryRunner;

/** Writes events into the outbox inside the caller's transaction. */
@Injectable()
export class OutboxService {
  /** How the insert goes: a named statement or not (`preparedStatements`, ADR 0807). */
  private readonly inserts: EnqueueInserts;
  /** Event ids: UUIDv7 (docs/adr/0607-event-ids-are-uuidv7.md). */
  private readonly ids = new EventIds();

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly wakeup: OutboxWakeup,
    private readonly schemas: OutboxSchemaRegistry,
    private readonly ambient: AmbientTransactions,
    private readonly instrumentation: OutboxInstrumentation,
  ) {
    this.inserts = new EnqueueInserts(options.preparedStatements);
  }

  /**
   * Adds one event to the outbox in your open transaction: the event commits with your writes or not at all.
   * Pass the transaction's `EntityManager` or its `QueryRunner`; with the `transactionHost` option, leave it out
   * inside `@Transactional()` / `TransactionHost.withTransaction(…)`. Returns the event id — or, for an event with
   * a `dedupe` key, an `OutboxEnqueueOutcome` (`{ eventId, outcome }`) that says whether it was written. Throws
   * `OutboxValidationError` (nothing written) on bad input, `OutboxError` when no transaction is open.
   */
  enqueue<const TName extends OutboxEventName>(event: OutboxEnqueueInput<TName> & Unkeyed): Promise<string>;
  enqueue<const TName extends OutboxEventName>(
    transaction: OutboxTransaction,
    event: OutboxEnqueueInput<TName> & Unkeyed,
  ): Promise<string>;
  enqueue<const TName extends OutboxEventName>(
    event: OutboxEnqueueInput<TName> & Keyed,
  ): Promise<OutboxEnqueueOutcome>;
  enqueue<const TName extends OutboxEventName>(
    transaction: OutboxTransaction,
    event: OutboxEnqueueInput<TName> & Keyed,
  ): Promise<OutboxEnqueueOutcome>;
  enqueue<const TName extends OutboxEventName>(
    event: OutboxEnqueueInput<TName> & MaybeKeyed,
  ): Promise<string | OutboxEnqueueOutcome>;
  enqueue<const TName extends OutboxEventName>(
    transaction: OutboxTransaction,
    event: OutboxEnqueueInput<TName> & MaybeKeyed,
  ): Promise<string | OutboxEnqueueOutcome>;
  async enqueue(...args: [unknown] | [OutboxTransaction, unknown]): Promise<string | OutboxEnqueueOutcome> {
    const [runner, event] = this.target(args);
    const checked = this.checked(event, 'event');
    const id = this.ids.next();
    const row = eventRow(id, checked instanceof Promise ? await checked : checked);
    // instrumentation: the trace context active now goes with the event
    if (this.instrumentation.active) row.traceparent = this.instrumentation.traceContext();
    if (row.dedupe) return (await this.enqueueKeyed(runner, [row]))[0];
    // delayed: a statement of its own; the undelayed insert's named statement stays as it was (ADR 0807)
    const insert = q.isDelayed(row) ? q.insertScheduledEvent : q.insertEvent;
    const rows = [row];
    const carried = this.carry(runner, rows);
    try {
      // the insert's promise awaited here, not through `insert`: one async frame less per call (ADR 1004)
      await this.inserts.run(runner, insert(this.options.names, row, carried?.payload));
    } catch (error) {
      throw this.refusal(error, rows);
    }
    const waiting = this.enqueued(runner, rows, false, carried);
    if (waiting) await waiting;
    return row.id;
  }

  /**
   * Adds several events in one statement, all checked before anything is written; the transaction as for
   * `enqueue`. Returns their ids in order — or, when any of them has a `dedupe` key, an `OutboxEnqueueOutcome`
   * for each.
   */
  enqueueMany<const TNames extends readonly OutboxEventName[]>(
    events: readonly [...{ [I in keyof TNames]: OutboxEnqueueInput<TNames[I]> & Unkeyed }],
  ): Promise<string[]>;
  enqueueMany<const TNames extends readonly OutboxEventName[]>(
    transaction: OutboxTransaction,
    events: readonly [...{ [I in keyof TNames]: OutboxEnqueueInput<TNames[I]> & Unkeyed }],
  ): Promise<string[]>;
  enqueueMany<const TNames extends readonly OutboxEventName[]>(
    events: readonly [...{ [I in keyof TNames]: OutboxEnqueueInput<TNames[I]> & Keyed }],
  ): Promise<OutboxEnqueueOutcome[]>;
  enqueueMany<const TNames extends readonly OutboxEventName[]>(
    transaction: OutboxTransaction,
    events: readonly [...{ [I in keyof TNames]: OutboxEnqueueInput<TNames[I]> & Keyed }],
  ): Promise<OutboxEnqueueOutcome[]>;
  enqueueMany<const TNames extends readonly OutboxEventName[]>(
    events: readonly [...{ [I in keyof TNames]: OutboxEnqueueInput<TNames[I]> & MaybeKeyed }],
  ): Promise<string[] | OutboxEnqueueOutcome[]>;
  enqueueMany<const TNames extends readonly OutboxEventName[]>(
    transaction: OutboxTransaction,
    events: readonly [...{ [I in keyof TNames]: OutboxEnqueueInput<TNames[I]> & MaybeKeyed }],
  ): Promise<string[] | OutboxEnqueueOutcome[]>;
  async enqueueMany(
    ...args: [unknown] | [OutboxTransaction, unknown]
  ): Promise<string[] | OutboxEnqueueOutcome[]> {
    const [runner, events] = this.target(args);
    if (!Array.isArray(events))
      throw new OutboxValidationError('events', messages.notAnArray('events', events));
    const rows: q.EventRow[] = [];
    for (const [i, event] of events.entries()) {
      const id = this.ids.next();
      rows.push(eventRow(id, await this.checked(event, `events[${i}]`)));
    }
    if (rows.length === 0) return [];
    // instrumentation: one trace context for the call's events
    const traceparent = this.instrumentation.active ? this.instrumentation.traceContext() : null;
    if (traceparent) for (const row of rows) row.traceparent = traceparent;
    if (rows.some((row) => row.dedupe)) return this.enqueueKeyed(runner, rows);
    const insert = rows.some(q.isDelayed) ? q.insertScheduledEvents : q.insertEvents;
    const carried = this.carry(runner, rows);
    await this.insert(runner, insert(this.options.names, rows, carried?.payload), rows);
    const waiting = this.enqueued(runner, rows, false, carried);
    if (waiting) await waiting;
    return rows.map((row) => row.id);
  }

  /** Checked events of which some carry a `dedupe` key: see `enqueueKeyed`. */
  private async enqueueKeyed(runner: QueryRunner, rows: q.EventRow[]): Promise<OutboxEnqueueOutcome[]> {
    const { outcomes, written, rescheduled } = await enqueueKeyed(this.options.names, rows, (statement) =>
      this.insert(runner, statement, rows),
    );
    if (written.length > 0 || rescheduled) await this.enqueued(runner, written, rescheduled);
    return outcomes;
  }

  /**
   * After the insert of `written`: wakes the relays at commit — for the tenants of the events due now, and, when
   * any is delayed or a scheduled event was `rescheduled` ('debounce'), every relay so it reads the earliest time
   * again — and tells the instrumentation.
   */
  private enqueued(
    runner: QueryRunner,
    written: q.EventRow[],
    rescheduled = false,
    carried: CarriedWakeup | null = null,
  ): Promise<void> | undefined {
    const delayed = rescheduled || written.some(q.isDelayed);
    // a promise only when there is a statement to wait for: the common case takes no turn of the event loop
    if (delayed && inHandlerScope(runner))
      return this.wakeAtCommitInHandler(runner).then(() =>
        this.afterInsert(runner, written, delayed, carried),
      );
    this.afterInsert(runner, written, delayed, carried);
    return undefined;
  }

  /** The wake-up's bookkeeping for the commit, and the instrumentation. */
  private afterInsert(
    runner: QueryRunner,
    written: q.EventRow[],
    delayed: boolean,
    carried: CarriedWakeup | null,
  ): void {
    this.wakeup.enqueuedIn(runner, dueTenants(written), delayed, carried);
    if (this.instrumentation.active && written.length > 0) this.instrumentation.eventsEnqueued(written);
  }

  /** The open transaction's runner (given, or ambient when only the events were passed), and the events. */
  private target(args: [unknown] | [OutboxTransaction, unknown]): [QueryRunner, unknown] {
    if (args.length === 1) return [transactionRunner(this.ambient.manager()), args[0]];
    return [transactionRunner(args[0]), args[1]];
  }

  /**
   * Checks an event's envelope and, when its name has a schema, its payload; returns the row to insert — at once
   * when the name has no schema (the common case then takes no turn of the event loop), else as a promise. A
   * payload that is itself a promise (or any thenable) is awaited first, as it always was.
   */
  private checked(event: unknown, where: string): ValidatedEvent | Promise<ValidatedEvent> {
    const input = this.withTenant(event as OutboxEventInput<unknown>);
    const payload = this.schemas.checkOnEnqueue(input, where);
    if (isThenable(payload))
      return Promise.resolve(payload).then((value) => this.validated(input, value, where));
    return this.validated(input, payload, where);
  }

  private validated(input: OutboxEventInput<unknown>, payload: unknown, where: string): ValidatedEvent {
    return validateEvent(
      payload === input?.payload ? input : { ...input, payload },
      where,
      this.options.maxPayloadBytes,
    );
  }

  /**
   * Runs the insert, named or not (see `EnqueueInserts`); a refusal by row-level security becomes an OutboxError
   * that says how to set the tenant (of `rows`).
   */
  private async insert<T>(
    runner: QueryRunner,
    statement: q.SqlStatement,
    rows: readonly q.EventRow[],
  ): Promise<T[]> {
    try {
      return await this.inserts.run<T>(runner, statement);
    } catch (error) {
      throw this.refusal(error, rows);
    }
  }

  /** What an insert of `rows` that failed with `error` throws: a refusal by row-level security, explained. */
  private refusal(error: unknown, rows: readonly q.EventRow[]): unknown {
    const pg = (error as { driverError?: { code?: string; message?: string } }).driverError;
    if (pg?.code !== '42501' || !pg.message?.includes('row-level security')) return error;
    const tenants = [...new Set(rows.map((r) => r.tenantId))];
    return new OutboxError(messages.rowLevelSecurity(tenants.join(', '), this.options.tenantSetting));
  }

  /**
   * Before a plain (unkeyed) insert of `rows`: the wake-up it is to carry when it is its turn to carry one (see
   * `OutboxWakeup.carry`), or null. Not async: the insert is the only promise an `enqueue` waits for.
   */
  private carry(runner: QueryRunner, rows: readonly q.EventRow[]): CarriedWakeup | null {
    const due = dueTenants(rows);
    return this.wakeup.carry(runner, due, due.length < rows.length);
  }

  /**
   * A delayed event enqueued by a handler (`context.manager`): the relay commits that batch itself, so no commit
   * subscriber hears it, and without a wake-up the relays would find the event only at their next poll. A NOTIFY
   * in that transaction wakes them at its commit (a rollback drops it); the notification lock it takes at commit
   * is for such batches only (ADR 0606 keeps NOTIFY out of the app's own transactions).
   */
  private async wakeAtCommitInHandler(runner: QueryRunner): Promise<void> {
    const statement = q.notifyWakeupAtCommit(this.options.names);
    await runner.query(statement.text, statement.values);
  }

  /** With tenancy off, an event without a tenant belongs to the single tenant. */
  private withTenant<T extends { tenantId?: string }>(event: T): T {
    if (
      this.options.tenancy === 'single' &&
      event &&
      typeof event === 'object' &&
      event.tenantId === undefined
    ) {
      return { ...event, tenantId: SINGLE_TENANT_ID };
    }
    return event;
  }
}

/**
 * The row to insert: the checked event and its id, field by field (a spread copy that a property is added to
 * costs more in Node 20: ADR 1201's addendum of 2026-12-07).
 */
function eventRow(id: string, e: ValidatedEvent): q.EventRow {
  return {
    id,
    tenantId: e.tenantId,
    eventName: e.eventName,
    payloadJson: e.payloadJson,
    aggregateType: e.aggregateType,
    aggregateId: e.aggregateId,
    correlationId: e.correlationId,
    schemaVersion: e.schemaVersion,
    occurredAt: e.occurredAt,
    deliverAt: e.deliverAt,
    delayMs: e.delayMs,
    dedupe: e.dedupe,
  };
}

/** The tenants of the rows not delayed, in order. */
function dueTenants(rows: readonly q.EventRow[]): string[] {
  const due: string[] = [];
  for (let i = 0; i < rows.length; i++) if (!q.isDelayed(rows[i]!)) due.push(rows[i]!.tenantId);
  return due;
}

/** The transaction's query runner, if it is open; otherwise a clear error. */
function transactionRunner(transaction: OutboxTransaction): QueryRunner {
  const runner = isQueryRunner(transaction) ? transaction : transaction?.queryRunner;
  if (runner?.isReleased) throw new OutboxError(messages.releasedRunner());
  if (!runner || !runner.isTransactionActive) throw new OutboxError(messages.noTransaction());
  return runner;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/** A QueryRunner (it starts transactions); an EntityManager has `queryRunner` instead. */
function isQueryRunner(value: unknown): value is QueryRunner {
  return typeof (value as QueryRunner | null)?.startTransaction === 'function';
}
