/**
 * The consumers the benchmark registers: two per event, in two variants — neither touches the database, or
 * one writes an effect row through `context.manager`. The raw-SQL baselines use the same consumer names and do
 * the same per-event write, so both sides produce the same rows.
 */
import { Injectable, type Type } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { BENCH_EVENT } from './bench-database';

/** Which consumers run: `no-db` (two in-memory handlers) or `db-write` (one of the two inserts an effect row). */
export type ConsumerVariant = 'no-db' | 'db-write';

/** The consumer that writes an effect row in the `db-write` variant. */
export const EFFECT_CONSUMER = 'bench.effect';

/** Consumer names per variant, identical for the library and the raw baselines. */
export const CONSUMER_NAMES: Readonly<Record<ConsumerVariant, readonly string[]>> = {
  'no-db': ['bench.notify', 'bench.audit'],
  'db-write': ['bench.notify', EFFECT_CONSUMER],
};

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

/** Records when each event reached its handler, on this process's monotonic clock. */
@Injectable()
export class LatencyConsumer {
  readonly handledAt = new Map<string, number>();

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.latency' })
  handle(event: OutboxEvent): void {
    if (!this.handledAt.has(event.eventId)) this.handledAt.set(event.eventId, performance.now());
  }
}

/** The provider class hosting a variant's consumers. */
export function consumerClass(variant: ConsumerVariant): Type {
  return variant === 'no-db' ? InMemoryConsumers : WritingConsumers;
}
