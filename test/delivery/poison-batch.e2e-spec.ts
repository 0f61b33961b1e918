import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueManyIn,
  recordEffect,
  TENANT,
  truncateOutbox,
} from '../support/outbox-fixture';

const OTHER = '0a1b2c3d-0000-4000-8000-00000000000b';
const SETTING = 'app.current_tenant_id';
const EVENT = 'test.poison.v1';

type Kind =
  | 'good'
  | 'dangling'
  | 'no-prototype'
  | 'throwing-toString'
  | 'throwing-message'
  | 'other-tenant'
  | 'other-tenant-last'
  | 'mutates-envelope';

/** Rejection values whose conversion to a string throws. */
function unprintable(kind: Kind): unknown {
  if (kind === 'no-prototype') return Object.create(null);
  if (kind === 'throwing-toString')
    return {
      toString(): string {
        throw new Error('not today');
      },
    };
  const error = new Error('hidden');
  Object.defineProperty(error, 'message', {
    get(): string {
      throw new Error('no message');
    },
  });
  return error;
}

/**
 * Per event, three consumers run in name order: `healthy`, then `poisoner` (which misbehaves as the event's
 * `kind` says), then `reader` (which notes the tenant its statements run under).
 */
@Injectable()
class PoisonConsumers {
  readonly readerTenants: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'healthy' })
  healthy(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'poisoner', maxAttempts: 3 })
  async poisoner(event: OutboxEvent<{ kind: Kind }>, context: OutboxHandlerContext): Promise<void> {
    const { kind } = event.data;
    if (kind === 'dangling') {
      // an ordinary deferred foreign key: checked at COMMIT, not here
      await context.manager.query('insert into fk_child (parent_id) values (gen_random_uuid())');
      return;
    }
    if (kind === 'no-prototype' || kind === 'throwing-toString' || kind === 'throwing-message')
      throw unprintable(kind);
    if (kind === 'mutates-envelope') {
      // the envelope is shared, and read-only by contract: writing to it must not move any outcome
      Object.assign(event, { eventId: '00000000-0000-4000-8000-000000000000', tenantId: OTHER });
      return;
    }
    if (kind === 'other-tenant' || kind === 'other-tenant-last') {
      await context.manager.query('select set_config($1, $2, true)', [SETTING, OTHER]);
      return;
    }
    await recordEffect(event, context);
  }

  @OnOutboxEvent(EVENT, { consumer: 'reader' })
  async reader(event: OutboxEvent<{ kind: Kind }>, context: OutboxHandlerContext): Promise<void> {
    // so that, on that event, the poisoner is the last handler of the batch to use the database
    if (event.data.kind === 'other-tenant-last') return;
    const [row] = await context.manager.query('select current_setting($1, true) as tenant', [SETTING]);
    this.readerTenants.push(row.tenant);
    await recordEffect(event, context);
  }
}

/**
 * A failure that shows only at batch level (a deferred constraint checked at COMMIT, a rejection value that
 * cannot be printed, a handler that changes the tenant setting) is narrowed to the delivery that caused it:
 * the batch's other consumers and events land, and are not charged an attempt. The relay runs on a role that
 * is neither superuser nor owner, so row-level security applies to it.
 */
describe('a batch with one poisonous delivery', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let producer: TestApp;
  let worker: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      'create table fk_parent (id uuid primary key)',
      `create table fk_child (parent_id uuid not null references fk_parent (id) deferrable initially deferred)`,
    ]);
    relayRole = await createLoginRole(db, 'outbox_relay', [
      EFFECTS_GRANT,
      'grant select, insert on fk_child, fk_parent to $ROLE',
    ]);
    producer = await buildApp({ url: db.url });
    worker = await buildApp({ url: relayRole.url, providers: [PoisonConsumers] });
  });
  afterAll(async () => {
    await worker?.close();
    await producer?.close();
    await db?.drop();
    await relayRole?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, EFFECTS_TABLE);
    worker.app.get(PoisonConsumers).readerTenants.length = 0;
  });

  /** Enqueues one event per kind, in one transaction (so one batch). */
  const enqueue = (kinds: Kind[]): Promise<string[]> =>
    enqueueManyIn(
      producer,
      kinds.map((kind) => ({ eventName: EVENT, payload: { kind } })),
    );

  const effects = (consumer: string) =>
    db
      .sql<{ event_id: string }>('select event_id from test_effects where consumer = $1 order by event_id', [
        consumer,
      ])
      .then((rows) => rows.map((r) => r.event_id));

  const deliveries = () =>
    db.sql<{
      event_id: string;
      consumer_name: string;
      status: string;
      attempt_count: number;
      last_error: string | null;
    }>(
      `select event_id, consumer_name, status, attempt_count, last_error from outbox_deliveries order by event_id, consumer_name`,
    );

  /** Every delivery of `consumer` for these events delivered on its first attempt. */
  const deliveredOnce = async (consumer: string, ids: string[]): Promise<void> => {
    const rows = (await deliveries()).filter((d) => d.consumer_name === consumer && ids.includes(d.event_id));
    expect(rows.map((d) => [d.status, d.attempt_count])).toEqual(ids.map(() => ['delivered', 1]));
  };

  it('lands every other delivery when one handler violates a deferred foreign key, and fails that one alone', async () => {
    const ids = await enqueue(['good', 'good', 'dangling', 'good', 'good']);
    await worker.relay.drain();
    const good = ids.filter((_, i) => i !== 2);
    expect(await effects('healthy')).toEqual([...ids].sort());
    expect(await effects('reader')).toEqual([...ids].sort());
    expect(await effects('poisoner')).toEqual([...good].sort());
    await deliveredOnce('healthy', ids);
    await deliveredOnce('reader', ids);
    await deliveredOnce('poisoner', good);
    const [bad] = (await deliveries()).filter((d) => d.event_id === ids[2] && d.consumer_name === 'poisoner');
    expect(bad).toMatchObject({ status: 'failed', attempt_count: 1 });
    expect(bad!.last_error).toMatch(/poisoner/);
    expect(bad!.last_error).toMatch(/foreign key/);
    expect(await db.sql('select count(*)::int as n from fk_child')).toEqual([{ n: 0 }]);
    expect(await db.sql(`select count(*)::int as n from event_outbox where status = 'published'`)).toEqual([
      { n: 4 },
    ]);
  });

  it('records a rejection value that cannot be printed as a failure of its own delivery', async () => {
    const ids = await enqueue(['no-prototype', 'good', 'throwing-toString', 'throwing-message']);
    await worker.relay.drain();
    expect(await effects('healthy')).toEqual([...ids].sort());
    expect(await effects('reader')).toEqual([...ids].sort());
    await deliveredOnce('healthy', ids);
    await deliveredOnce('reader', ids);
    await deliveredOnce('poisoner', [ids[1]!]);
    const failedRows = (await deliveries()).filter(
      (d) => d.consumer_name === 'poisoner' && d.event_id !== ids[1],
    );
    expect(failedRows.map((d) => [d.status, d.attempt_count])).toEqual([
      ['failed', 1],
      ['failed', 1],
      ['failed', 1],
    ]);
    for (const row of failedRows) expect(row.last_error).toMatch(/unprintable/);
  });

  it('records every outcome where the claim says, whatever a handler wrote into the shared envelope', async () => {
    const ids = await enqueue(['good', 'mutates-envelope', 'good']);
    await worker.relay.drain();
    const rows = await deliveries();
    expect(rows.map((d) => [d.event_id, d.consumer_name, d.status])).toEqual(
      [...ids].sort().flatMap((id) => ['healthy', 'poisoner', 'reader'].map((c) => [id, c, 'delivered'])),
    );
    expect(await db.sql(`select count(*)::int as n from event_outbox where status = 'published'`)).toEqual([
      { n: 3 },
    ]);
  });

  it('fails a handler that changes the tenant setting, alone, and the next handler runs in the batch’s tenant', async () => {
    const ids = await enqueue(['good', 'other-tenant', 'good', 'other-tenant-last']);
    await worker.relay.drain();
    expect(worker.app.get(PoisonConsumers).readerTenants.every((t) => t === TENANT)).toBe(true);
    expect(worker.app.get(PoisonConsumers).readerTenants.length).toBeGreaterThanOrEqual(3);
    expect(await effects('healthy')).toEqual([...ids].sort());
    await deliveredOnce('healthy', ids);
    await deliveredOnce('reader', ids);
    await deliveredOnce('poisoner', [ids[0]!, ids[2]!]);
    for (const id of [ids[1]!, ids[3]!]) {
      const [row] = (await deliveries()).filter((d) => d.event_id === id && d.consumer_name === 'poisoner');
      expect(row).toMatchObject({ status: 'failed', attempt_count: 1 });
      expect(row!.last_error).toMatch(/poisoner/);
      expect(row!.last_error).toContain(SETTING);
      expect(row!.last_error).not.toMatch(/lost their lease/);
    }
  });
});
