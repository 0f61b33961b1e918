import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';

/** The consumers' own table: no unique constraint, so a duplicate effect shows up as a second row. */
export const EFFECTS_TABLE_SQL = `create table test_effects (
  id bigint generated always as identity primary key,
  event_id uuid not null,
  consumer text not null,
  attempt int not null,
  created_at timestamptz not null default now()
)`;

/** Writes one effect row through the handler's transaction. */
export async function recordEffect(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
  await context.manager.query('insert into test_effects (event_id, consumer, attempt) values ($1, $2, $3)', [
    event.eventId,
    context.consumer,
    context.attempt,
  ]);
}

/** A consumer that writes through `context.manager` and one that touches no database, both of `test.thing.created.v1`. */
@Injectable()
export class ThingConsumers {
  readonly memoryCalls: string[] = [];

  @OnOutboxEvent('test.thing.created.v1')
  async writeRow(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
  }

  @OnOutboxEvent('test.thing.created.v1', { consumer: 'memory' })
  remember(event: OutboxEvent): void {
    this.memoryCalls.push(event.eventId);
  }
}
