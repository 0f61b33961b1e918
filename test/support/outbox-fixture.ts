/**
 * What the e2e specs share about the outbox's data: tenant ids, enqueueing in a committed transaction of its
 * own, emptying the outbox's tables between tests, and the consumers' effects table (a row per handler call
 * that wrote through `context.manager`) with the readers the specs assert on.
 */
import { Injectable } from '@nestjs/common';
import {
  OnOutboxEvent,
  type OutboxEvent,
  type OutboxEventInput,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import type { EventRow } from '../../libs/outbox/src/store/sql';
import type { TestApp } from './build-app';
import type { TestDatabase } from './test-database';

/** The tenant of a spec's events, unless it needs several (each spec file has a database of its own). */
export const TENANT = '5b0e6a5e-2a1c-4c1e-9a57-3f0a2b1c4d5e';
/** Tenants for specs about several: `TENANTS[0]` is {@link TENANT}. */
export const TENANTS = [
  TENANT,
  'a1b2c3d4-0a1b-4c2d-8e3f-405162738495',
  'b2c3d4e5-1b2c-4d3e-9f40-516273849506',
] as const;

/** An event as the specs write it: `tenantId` defaults to {@link TENANT}, `payload` to `{}`. */
export type TestEvent = Omit<OutboxEventInput<unknown>, 'tenantId' | 'payload'> & {
  tenantId?: string;
  payload?: unknown;
};

function input(event: TestEvent): OutboxEventInput<unknown> {
  return { ...event, tenantId: event.tenantId ?? TENANT, payload: event.payload ?? {} };
}

/** Enqueues one event through `app` in a transaction of its own; resolves with its id once committed. */
export function enqueueIn(app: TestApp, event: TestEvent): Promise<string> {
  return app.dataSource.transaction((manager) => app.outbox.enqueue(manager, input(event)));
}

/** Enqueues `events` through `app` in one transaction; resolves with their ids, in order, once committed. */
export function enqueueManyIn(app: TestApp, events: readonly TestEvent[]): Promise<string[]> {
  return app.dataSource.transaction((manager) => app.outbox.enqueueMany(manager, events.map(input)));
}

/**
 * A checked event row for the store's insert statements, as `enqueue` hands them one: its id
 * `0192a000-0000-7000-8000-` and `i` in twelve digits (a UUIDv7), the given event name, an empty payload.
 */
export function eventRow(i: number, eventName: string, extra: Partial<EventRow> = {}): EventRow {
  return {
    id: `0192a000-0000-7000-8000-${String(i).padStart(12, '0')}`,
    tenantId: TENANT,
    eventName,
    payloadJson: '{}',
    aggregateType: null,
    aggregateId: null,
    correlationId: null,
    schemaVersion: 1,
    occurredAt: null,
    ...extra,
  };
}

/**
 * Empties the outbox's event, delivery, lease and inbox tables, and `tables` (a spec's own, such as
 * {@link EFFECTS_TABLE}). The consumer registry stays: the apps of the spec wrote it at boot.
 */
export function truncateOutbox(db: TestDatabase, ...tables: string[]): Promise<void> {
  const outbox = [
    'event_outbox',
    'outbox_deliveries',
    'outbox_event_leases',
    'consumer_inbox',
    'outbox_dedupe_keys',
  ];
  return truncateTables(db, [...outbox, ...tables].join(', '));
}

/**
 * Runs `truncate <tables>` (`tables` as the statement takes them: names, then `cascade` if wanted) while relays
 * may still be running (a spec's apps and fleets outlive its tests): `truncate` locks the tables one after another,
 * a relay's transaction may hold one of them and wait for the next, and PostgreSQL then cancels one of the two with
 * a deadlock (40P01). The truncate is one statement, rolled back whole when cancelled, so it is run again, a few
 * times at most.
 */
export async function truncateTables(db: Pick<TestDatabase, 'sql'>, tables: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.sql(`truncate ${tables}`);
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== '40P01' || attempt === TRUNCATE_ATTEMPTS) throw error;
    }
  }
}

/** How many times {@link truncateTables} tries before it gives up on deadlocks with running relays. */
const TRUNCATE_ATTEMPTS = 5;

/** Makes every scheduled retry due now, so a test does not wait for backoff. */
export async function makeRetriesDue(db: TestDatabase): Promise<void> {
  await db.sql(`update outbox_deliveries set next_attempt_at = now() where status = 'failed'`);
}

/** The delivery row of `consumer` for `eventId`, or undefined. */
export async function deliveryOf(
  db: TestDatabase,
  eventId: string,
  consumer: string,
): Promise<Record<string, unknown> | undefined> {
  const [row] = await db.sql('select * from outbox_deliveries where event_id = $1 and consumer_name = $2', [
    eventId,
    consumer,
  ]);
  return row;
}

/** The `event_outbox` row of `eventId`, or undefined. */
export async function eventOf(
  db: TestDatabase,
  eventId: string,
): Promise<Record<string, unknown> | undefined> {
  const [row] = await db.sql('select * from event_outbox where id = $1', [eventId]);
  return row;
}

/** The consumers' own table: no unique constraint, so a duplicate effect shows up as a second row. */
export const EFFECTS_TABLE = 'test_effects';

/** Creates {@link EFFECTS_TABLE} (pass it to `createTestDatabase`). */
export const EFFECTS_TABLE_SQL = `create table ${EFFECTS_TABLE} (
  id bigint generated always as identity primary key,
  event_id uuid not null,
  consumer text not null,
  attempt int not null,
  created_at timestamptz not null default now()
)`;

/** Lets a login role of `createLoginRole` write effects (its handlers run as that role). */
export const EFFECTS_GRANT = `grant insert on ${EFFECTS_TABLE} to $ROLE`;

/** Writes one effect row through the handler's transaction. */
export async function recordEffect(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
  await context.manager.query(
    `insert into ${EFFECTS_TABLE} (event_id, consumer, attempt) values ($1, $2, $3)`,
    [event.eventId, context.consumer, context.attempt],
  );
}

/** One effect row. */
export interface Effect {
  event_id: string;
  consumer: string;
  attempt: number;
}

/** The effects written so far, in the order they were written: every consumer's, or `consumer`'s. */
export function effects(db: TestDatabase, consumer?: string): Promise<Effect[]> {
  return consumer === undefined
    ? db.sql<Effect>(`select event_id, consumer, attempt from ${EFFECTS_TABLE} order by id`)
    : db.sql<Effect>(
        `select event_id, consumer, attempt from ${EFFECTS_TABLE} where consumer = $1 order by id`,
        [consumer],
      );
}

/** The event ids of the effects written so far, in order: every consumer's, or `consumer`'s. */
export async function effectIds(db: TestDatabase, consumer?: string): Promise<string[]> {
  return (await effects(db, consumer)).map((e) => e.event_id);
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
