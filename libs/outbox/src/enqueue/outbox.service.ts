import { Inject, Injectable } from '@nestjs/common';
import { v7 as uuidv7 } from 'uuid';
import type { EntityManager, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import { OutboxError, OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxEventInput } from '../interfaces/outbox-event.interface';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import * as q from '../store/outbox.queries';
import { SINGLE_TENANT_ID } from '../outbox.constants';
import { validateEvent } from './event-validation';
import { OutboxWakeup } from '../relay/outbox-wakeup';
import { OutboxInstrumentation } from '../observability/outbox-instrumentation';

/** An event without `tenantId`, accepted when `tenancy` is `single`. */
export type TenantlessEvent<TPayload> = Omit<OutboxEventInput<TPayload>, 'tenantId'> & {
  tenantId?: undefined;
};

/** Writes events into the outbox inside the caller's transaction. */
@Injectable()
export class OutboxService {
  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly wakeup: OutboxWakeup,
    private readonly instrumentation: OutboxInstrumentation,
  ) {}

  /**
   * Adds one event to the outbox through `manager`, in its open transaction: the event commits with your
   * writes or not at all. Returns the event id. Throws `OutboxValidationError` (nothing written) on bad input,
   * `OutboxError` when `manager` has no open transaction.
   */
  async enqueue<TPayload>(
    manager: EntityManager,
    event: OutboxEventInput<TPayload> | TenantlessEvent<TPayload>,
  ): Promise<string> {
    const runner = transactionRunner(manager);
    const row: q.EventRow = {
      id: newEventId(),
      ...validateEvent(
        this.withTenant(event) as OutboxEventInput<unknown>,
        'event',
        this.options.maxPayloadBytes,
      ),
    };
    // instrumentation: the trace context active now goes with the event
    if (this.instrumentation.active) row.traceparent = this.instrumentation.traceContext();
    await this.insert(runner, q.insertEvent(row), [row.tenantId]);
    this.wakeup.enqueuedIn(runner, [row.tenantId]);
    if (this.instrumentation.active) this.instrumentation.eventsEnqueued([row]);
    return row.id;
  }

  /** Adds several events in one statement, all checked before anything is written. Returns their ids in order. */
  async enqueueMany<TPayload>(
    manager: EntityManager,
    events: readonly (OutboxEventInput<TPayload> | TenantlessEvent<TPayload>)[],
  ): Promise<string[]> {
    const runner = transactionRunner(manager);
    if (!Array.isArray(events))
      throw new OutboxValidationError('events', messages.notAnArray('events', events));
    const rows = events.map((event, i): q.EventRow => ({
      id: newEventId(),
      ...validateEvent(
        this.withTenant(event) as OutboxEventInput<unknown>,
        `events[${i}]`,
        this.options.maxPayloadBytes,
      ),
    }));
    if (rows.length === 0) return [];
    // instrumentation: one trace context for the call's events
    const traceparent = this.instrumentation.active ? this.instrumentation.traceContext() : null;
    if (traceparent) for (const row of rows) row.traceparent = traceparent;
    const tenants = [...new Set(rows.map((r) => r.tenantId))];
    await this.insert(runner, q.insertEvents(rows), tenants);
    this.wakeup.enqueuedIn(runner, tenants);
    if (this.instrumentation.active) this.instrumentation.eventsEnqueued(rows);
    return rows.map((row) => row.id);
  }

  /** Runs the insert; a refusal by row-level security becomes an OutboxError that says how to set the tenant. */
  private async insert(runner: QueryRunner, statement: q.SqlStatement, tenants: string[]): Promise<void> {
    try {
      await runner.query(statement.text, statement.values);
    } catch (error) {
      const pg = (error as { driverError?: { code?: string; message?: string } }).driverError;
      if (pg?.code === '42501' && pg.message?.includes('row-level security')) {
        throw new OutboxError(messages.rowLevelSecurity(tenants.join(', '), this.options.tenantSetting));
      }
      throw error;
    }
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
 * Event ids are UUIDv7 (time-ordered): new rows land at the right edge of the primary-key and inbox indexes
 * instead of at random pages, so inserts stay cheap as the tables grow (see the benchmark's backlog scale).
 */
function newEventId(): string {
  return uuidv7();
}

/** The manager's query runner, if it is inside an open transaction; otherwise a clear error. */
function transactionRunner(manager: EntityManager): QueryRunner {
  const runner = manager?.queryRunner;
  if (runner?.isReleased) throw new OutboxError(messages.releasedRunner());
  if (!runner || !runner.isTransactionActive) throw new OutboxError(messages.noTransaction());
  return runner;
}
