/**
 * The consumers the benchmark registers: two per event, in three variants — neither touches the database, one
 * writes an effect row through `context.manager`, or both do. The raw-SQL baselines and the peers use the same
 * consumer names and do the same per-event writes, so every system produces the same rows.
 */
import { Injectable, type Type } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { BENCH_EVENT } from './bench-database';

/**
 * Which consumers run: `no-db` (two in-memory handlers), `db-write` (one of the two inserts an effect row) or
 * `db-write-all` (each of the two inserts one).
 */
export type ConsumerVariant = 'no-db' | 'db-write' | 'db-write-all';

/** The consumer that writes an effect row in the `db-write` and `db-write-all` variants. */
export const EFFECT_CONSUMER = 'bench.effect';

/** The second writing consumer of the `db-write-all` variant. */
export const AUDIT_EFFECT_CONSUMER = 'bench.audit-effect';

/** Consumer names per variant, identical for the library, the raw baselines and the peers. */
export const CONSUMER_NAMES: Readonly<Record<ConsumerVariant, readonly string[]>> = {
  'no-db': ['bench.notify', 'bench.audit'],
  'db-write': ['bench.notify', EFFECT_CONSUMER],
  'db-write-all': [EFFECT_CONSUMER, AUDIT_EFFECT_CONSUMER],
};

/** Whether `consumer` writes an effect row (the same statement on every system). */
export function writesEffect(consumer: string): boolean {
  return consumer === EFFECT_CONSUMER || consumer === AUDIT_EFFECT_CONSUMER;
}

/** Effect rows a drained backlog of `events` leaves: one per event and writing consumer. */
export function expectedEffects(variant: ConsumerVariant, events: number): number {
  return CONSUMER_NAMES[variant].filter(writesEffect).length * events;
}

/** The effect a writing consumer leaves; the raw baselines run the same statement. */
export const INSERT_EFFECT_SQL = 'insert into public.consumer_effects (event_id, consumer) values ($1, $2)';

/** Two consumers that never touch the database. */
@Injectable()
export class InMemoryConsumers {
  handled = 0;

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.notify' })
  notify(): void {
    this.handled++;
  }

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.audit' })
  audit(): void {
    this.handled++;
  }
}

/** One consumer in memory, one that writes a row through the handler's transaction. */
@Injectable()
export class WritingConsumers {
  handled = 0;

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.notify' })
  notify(): void {
    this.handled++;
  }

  @OnOutboxEvent(BENCH_EVENT, { consumer: EFFECT_CONSUMER })
  async record(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query(INSERT_EFFECT_SQL, [event.eventId, context.consumer]);
    this.handled++;
  }
}

/** Both consumers write a row through the handler's transaction. */
@Injectable()
export class AllWritingConsumers {
  handled = 0;

  @OnOutboxEvent(BENCH_EVENT, { consumer: EFFECT_CONSUMER })
  async record(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query(INSERT_EFFECT_SQL, [event.eventId, context.consumer]);
    this.handled++;
  }

  @OnOutboxEvent(BENCH_EVENT, { consumer: AUDIT_EFFECT_CONSUMER })
  async audit(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query(INSERT_EFFECT_SQL, [event.eventId, context.consumer]);
    this.handled++;
  }
}

/** Records when each event reached its handler, on this process's monotonic clock. */
@Injectable()
export class LatencyConsumer {
  readonly handledAt = new Map<string, number>();

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.latency' })
  handle(event: OutboxEvent): void {
    if (!this.handledAt.has(event.eventId)) this.handledAt.set(event.eventId, performance.now());
  }
}

/**
 * The fairness scenario's consumer: counts the events handled per tenant, and records when each event of the
 * tenants it watches reached it (the small tenant's, not the backlog's), on this process's monotonic clock.
 */
@Injectable()
export class FairnessConsumer {
  readonly handledAt = new Map<string, number>();
  readonly handled = new Map<string, number>();
  readonly watched = new Set<string>();

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.fairness' })
  handle(event: OutboxEvent): void {
    this.handled.set(event.tenantId, (this.handled.get(event.tenantId) ?? 0) + 1);
    if (this.watched.has(event.tenantId) && !this.handledAt.has(event.eventId))
      this.handledAt.set(event.eventId, performance.now());
  }

  /** Events of `tenantId` handled so far. */
  count(tenantId: string): number {
    return this.handled.get(tenantId) ?? 0;
  }
}

/**
 * A consumer with a concurrency cap and a rate limit, of events no bench enqueues: the relay that hosts it takes
 * its turn and carries the limit checks in its claims (ADR 1104) while it drains other consumers' events; what
 * that costs the unlimited consumers beside it is measured against the same drain without it.
 */
@Injectable()
export class LimitedNeighbour {
  @OnOutboxEvent('bench.limited.v1', {
    consumer: 'bench.limited',
    concurrency: { global: 10 },
    rateLimit: { limit: 50, intervalMs: 1000 },
  })
  handle(): void {}
}

/** The provider class hosting a variant's consumers. */
export function consumerClass(variant: ConsumerVariant): Type {
  const classes: Record<ConsumerVariant, Type> = {
    'no-db': InMemoryConsumers,
    'db-write': WritingConsumers,
    'db-write-all': AllWritingConsumers,
  };
  return classes[variant];
}

/**
 * The soak's two consumers: one in memory that notes when each event reached it (the run's latency and
 * throughput), one that writes an effect row through the handler's transaction.
 */
@Injectable()
export class SoakConsumers {
  /** Events handled by the timed consumer, whose time the soak has not taken yet. */
  readonly handledAt = new Map<string, number>();
  handled = 0;

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.notify' })
  notify(event: OutboxEvent): void {
    this.handled++;
    if (!this.handledAt.has(event.eventId)) this.handledAt.set(event.eventId, performance.now());
  }

  @OnOutboxEvent(BENCH_EVENT, { consumer: EFFECT_CONSUMER })
  async record(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query(INSERT_EFFECT_SQL, [event.eventId, context.consumer]);
  }
}
