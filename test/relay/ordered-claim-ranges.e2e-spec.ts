import { Client } from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { claimDueDeliveries, type SqlStatement } from '../../libs/outbox/src/store/sql';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { partitionedLayoutStatements, runSql } from '../support/template-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';
import { genericPlanBuffers } from '../support/generic-plan-buffers';

const DAY = 86_400_000;
const ORDERED = 'OrderedRanges.apply';
const names = outboxNames();

/**
 * The due claim's check for ordered consumers in the partitioned layout (docs/adr/1207-partitioned-history.md,
 * addendum "The ordered consumers' check starts at the oldest open delivery"): it starts at the tenant's oldest
 * open ordered delivery, so settled ranges below cost it nothing per candidate, and whatever still holds an
 * aggregate back in an older range — below the claim's floor — still does. On a database converted here, with
 * daily ranges from four days ago, whatever `OUTBOX_TEST_PARTITIONED` says.
 */
describe('the ordered consumers’ due claim (partitioned layout)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase([], { runMigrations: true });
    await runSql(db.url, partitionedLayoutStatements(new Date(Date.now() - 4 * DAY)));
  });
  afterEach(async () => {
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  /**
   * An event of aggregate `order`/`aggregate` whose id was made at `at`, with `status`, and, unless `delivery` is
   * null, the ordered consumer's delivery of it with that status (a `failed` one due in three hours). Its id.
   */
  async function event(
    aggregate: string,
    at: number,
    status: string,
    delivery: 'pending' | 'failed' | 'processing' | 'dead' | 'delivered' | null,
  ): Promise<string> {
    const id = uuidv7({ msecs: at });
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, aggregate_type, aggregate_id)
       values ($1, $2, 'test.order.v1', '{}', $3, 'order', $4)`,
      [id, TENANT, status, aggregate],
    );
    if (delivery !== null)
      await db.sql(
        `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, aggregate_key,
                                        next_attempt_at, lease_expires_at)
         select id, tenant_id, $2, seq, $3, json_build_array(aggregate_type, aggregate_id)::text,
                case when $3 = 'failed' then now() + interval '3 hours' else now() end,
                case when $3 = 'processing' then now() + interval '1 hour' end
           from event_outbox where id = $1`,
        [id, ORDERED, delivery],
      );
    return id;
  }

  /** The claim of up to 100 due deliveries of the ordered consumer, bounded by `floor`. */
  function claim(floor: string): SqlStatement {
    return claimDueDeliveries(names, {
      tenantId: TENANT,
      consumers: [ORDERED],
      limit: 100,
      leaseToken: uuidv7(),
      leaseMs: 30_000,
      floor,
    });
  }

  /** The event ids the claim takes, in a transaction rolled back. */
  async function claimed(floor: string): Promise<string[]> {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query('begin');
      const { text, values } = claim(floor);
      const { rows } = await client.query<{ event_id: string }>(text, values as unknown[]);
      return rows.map((r) => r.event_id).sort();
    } finally {
      await client.query('rollback');
      await client.end();
    }
  }

  /** Shared buffers (hit + read) of one execution of the claim on its generic plan. */
  async function claimBuffers(floor: string): Promise<number> {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      return await genericPlanBuffers(client, claim(floor));
    } finally {
      await client.end();
    }
  }

  /** The smallest UUIDv7 of the current hour: a floor above the older ranges. */
  function floorOfThisHour(): string {
    const hour = new Date();
    hour.setUTCMinutes(0, 0, 0);
    const ms = hour.getTime().toString(16).padStart(12, '0');
    return `${ms.slice(0, 8)}-${ms.slice(8)}-7000-8000-000000000000`;
  }

  it('holds an aggregate back behind a dead, failed, leased or pending delivery, or a pending event, of an older range below the floor', async () => {
    const old = Date.now() - 3 * DAY;
    const holders = {
      dead: await event('dead', old, 'published', 'dead'),
      failed: await event('failed', old, 'processing', 'failed'),
      processing: await event('processing', old, 'processing', 'processing'),
      pending: await event('pending', old, 'processing', 'pending'),
      event: await event('event', old, 'pending', null),
    };
    await event('free', old, 'published', 'delivered');
    const later = new Map<string, string>();
    for (const aggregate of [...Object.keys(holders), 'free'])
      later.set(aggregate, await event(aggregate, Date.now(), 'processing', 'pending'));
    const floor = floorOfThisHour();
    expect(Object.values(holders).every((id) => id < floor)).toBe(true);
    // the old pending delivery is due and below the floor: not claimed by the bounded claim; the others wait
    expect(await claimed(floor)).toEqual([later.get('free')]);
    // a replay: the dead delivery back to pending is seen (and claimed by a claim without the floor first)
    await db.sql(
      `update outbox_deliveries set status = 'pending', next_attempt_at = now() where event_id = $1`,
      [holders.dead],
    );
    expect(await claimed(NIL_UUID)).toEqual([holders.dead, holders.pending, later.get('free')].sort());
    expect(await claimed(floor)).toEqual([later.get('free')]);
    // once every holder is delivered (the event fanned out and delivered), the later deliveries go
    await db.sql(`update outbox_deliveries set status = 'delivered' where event_id = any($1::uuid[])`, [
      Object.values(holders),
    ]);
    await db.sql(`update event_outbox set status = 'published' where id = $1`, [holders.event]);
    expect(await claimed(floor)).toEqual([...later.values()].sort());
  });

  it('reads a few buffers more per settled range, not one probe per range for each candidate', async () => {
    // 20 ordered aggregates due now, each with a delivered history three days ago
    for (let i = 0; i < 20; i++) {
      await event(`a${i}`, Date.now() - 3 * DAY, 'published', 'delivered');
      await event(`a${i}`, Date.now(), 'processing', 'pending');
    }
    await db.sql('analyze');
    const floor = floorOfThisHour();
    // 90 hourly ranges, 40 days back, empty (settled)
    const starts = Array.from({ length: 90 }, (_, i) => new Date(Date.now() - 40 * DAY + i * 3_600_000));
    for (const at of starts) at.setUTCMinutes(0, 0, 0);
    try {
      const before = await claimBuffers(floor);
      for (const at of starts)
        for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox'])
          await db.sql(`select outbox_create_range($1::regclass, $2::timestamptz, interval '1 hour')`, [
            table,
            at.toISOString(),
          ]);
      const after = await claimBuffers(floor);
      expect(await claimed(floor)).toHaveLength(20);
      // the check's bounds are read once per claim: a probe or two of each new range, about 5 buffers a range
      // in all (457 here); unbounded, the check probed each new range for each of the 20 candidates (about
      // 20 × 90 × 4 buffers). At most half a buffer per range for each candidate:
      expect({ before, growth: Math.min(after - before, (20 * 90) / 2) }).toEqual({
        before,
        growth: after - before,
      });
    } finally {
      for (const at of starts)
        for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox'])
          await db.sql(
            `drop table ${table}_p${at.toISOString().slice(0, 13).replace(/[-]/g, '').replace('T', 't')}00`,
          );
    }
  });
});
