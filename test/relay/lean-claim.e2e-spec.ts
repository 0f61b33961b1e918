import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueManyIn, TENANT, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.lean.v1';
const UNHEARD = 'test.lean.unheard.v1';

@Injectable()
class Local {
  readonly seen: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'lean-local' })
  handle(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }
}

/**
 * The lean claim of new events: where every consumer of the events in the persisted registry is one of this
 * instance's in-process consumers, a claim leases the events without the fan-out; any other consumer, or
 * none, and the fan-out runs instead — the events get what the fan-out gives them. What the events get is
 * asserted here; which claim each round sends, and a batch's closing, are pinned in relay-statements.e2e-spec.ts.
 */
describe('the lean claim of new events', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await truncateOutbox(db);
    await db.sql(`delete from outbox_consumers where name = 'elsewhere'`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function start(): Promise<Local> {
    t = await buildApp({ url: db.url, providers: [Local] });
    return t.app.get(Local);
  }

  function enqueue(eventName: string, count: number): Promise<string[]> {
    return enqueueManyIn(
      t!,
      Array.from({ length: count }, (_, i) => ({ eventName, payload: { i } })),
    );
  }

  it('claims events of in-process consumers without the fan-out, and writes no row until their outcome', async () => {
    const local = await start();
    const ids = await enqueue(EVENT, 3);
    expect(await t!.relay.runOnce()).toMatchObject({ eventsClaimed: 3, succeeded: 3 });
    expect([...local.seen].sort()).toEqual([...ids].sort());
    const rows = await db.sql<{ status: string; n: number }>(
      `select e.status, (select count(*)::int from outbox_deliveries d where d.event_id = e.id and d.status = 'delivered') as n
         from event_outbox e order by e.seq`,
    );
    expect(rows).toEqual(ids.map(() => ({ status: 'published', n: 1 })));
  });

  it('closes a batch whose handlers never asked for context.manager: its outcomes recorded and committed', async () => {
    await start();
    const ids = await enqueue(EVENT, 2);
    expect(await t!.relay.runOnce()).toMatchObject({ succeeded: 2 });
    expect(
      await db.sql(`select event_id, status, attempt_count from outbox_deliveries order by event_id`),
    ).toEqual([...ids].sort().map((event_id) => ({ event_id, status: 'delivered', attempt_count: 1 })));
    expect(await db.sql(`select count(*)::int as n from outbox_event_leases`)).toEqual([{ n: 0 }]);
  });

  it("runs the fan-out when another instance's consumer takes the events too, and only the fan-out for a while", async () => {
    const local = await start();
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('elsewhere', $1, now())`,
      [[EVENT]],
    );
    const ids = await enqueue(EVENT, 2);
    expect(await t!.relay.runOnce()).toMatchObject({ eventsClaimed: 2, succeeded: 2 });
    expect([...local.seen].sort()).toEqual([...ids].sort());
    // the other instance's pairs wait for it, as the fan-out leaves them
    const waiting = await db.sql<{ event_id: string }>(
      `select event_id from outbox_deliveries where consumer_name = 'elsewhere' and status = 'pending'`,
    );
    expect(waiting.map((r) => r.event_id).sort()).toEqual([...ids].sort());
    const [later] = await enqueue(EVENT, 1);
    expect(await t!.relay.runOnce()).toMatchObject({ succeeded: 1 });
    expect(
      await db.sql(`select consumer_name, status from outbox_deliveries where event_id = $1 order by 1`, [
        later,
      ]),
    ).toEqual([
      { consumer_name: 'elsewhere', status: 'pending' },
      { consumer_name: 'lean-local', status: 'delivered' },
    ]);
  });

  it('runs the fan-out for events nobody consumes: they are settled as no_handlers', async () => {
    await start();
    const [unheard] = await enqueue(UNHEARD, 1);
    await t!.relay.runOnce();
    expect(await db.sql('select status from event_outbox where id = $1', [unheard])).toEqual([
      { status: 'no_handlers' },
    ]);
    // not a consumer of another kind: the next claim is lean again
    const ids = await enqueue(EVENT, 1);
    expect(await t!.relay.runOnce()).toMatchObject({ succeeded: 1 });
    expect(t!.app.get(Local).seen).toEqual(ids);
  });

  it('runs the fan-out while a fanned-out event of the tenant waits for recovery', async () => {
    const local = await start();
    // a processing event whose lease expired: a relay fanned it out and died before its outcome
    const [stale] = await enqueue(EVENT, 1);
    await db.sql(`update event_outbox set status = 'processing', deliveries_open = 1 where id = $1`, [stale]);
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       values ($1, $2, gen_random_uuid(), now() - interval '1 second')`,
      [stale, TENANT],
    );
    await t!.relay.runOnce();
    expect(local.seen).toEqual([stale]);
    expect(await db.sql('select status from event_outbox where id = $1', [stale])).toEqual([
      { status: 'published' },
    ]);
  });
});
