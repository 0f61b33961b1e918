import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { buildApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { dueTenants, type DuePositions } from '../../libs/outbox/src/store/sql/due-tenants';
import { SERVER_START } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames, type OutboxNames } from '../../libs/outbox/src/model/table-names';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { createTestDatabase, migrateOutbox, type TestDatabase } from '../support/test-database';
import { createLoginRole } from '../support/test-roles';
import { truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.due-six.v1';
const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';
/** Tenants spread over the uuid order, both ends included. */
const TENANTS = [
  NIL_UUID,
  '00000000-0000-4000-8000-000000000001',
  '1a1a1a1a-0000-4000-8000-000000000000',
  '3c3c3c3c-0000-4000-8000-000000000000',
  '5e5e5e5e-0000-4000-8000-000000000000',
  '7f7f7f7f-0000-4000-8000-000000000000',
  '80000000-0000-4000-8000-000000000000',
  '9a9a9a9a-0000-4000-8000-000000000000',
  'bcbcbcbc-0000-4000-8000-000000000000',
  'dededede-0000-4000-8000-000000000000',
  'fffffffe-ffff-4fff-bfff-ffffffffffff',
  MAX_UUID,
];

interface Due {
  tenant_id: string;
  has_new: boolean;
  has_due: boolean;
}

/** A small deterministic generator (mulberry32), so a failing seed can be run again. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The six-argument form's security in the schema of `names`: definer, settings, who may execute it. */
async function security(
  db: TestDatabase,
  names: OutboxNames,
): Promise<{ definer: boolean; config: string[]; relay: boolean; app: boolean; open: boolean } | undefined> {
  const [fn] = await db.sql<{
    definer: boolean;
    config: string[];
    relay: boolean;
    app: boolean;
    open: boolean;
  }>(
    `select p.prosecdef as definer, p.proconfig as config,
            has_function_privilege('outbox_relay', p.oid, 'execute') as relay,
            has_function_privilege('outbox_app', p.oid, 'execute') as app,
            has_function_privilege('public', p.oid, 'execute') as open
       from pg_proc p
      where p.oid = '${names.dueTenants}(integer, uuid, uuid[], bigint[], text, timestamptz)'::regprocedure`,
  );
  return fn;
}

/**
 * `outbox_due_tenants`' six-argument form against the two-argument one (docs/adr/1206, addendum on the due-tenant
 * scan): with every position at or below each tenant's pending events and every expired event lease in the
 * window, the two must list the same tenants, kinds and pages, whatever mix of due work each tenant has (new
 * events, event leases expired, retries, delivery leases expired, paused pairs), the two ends of the uuid order
 * included. And the new form keeps the first's security: SECURITY DEFINER, search_path pinned, execute for
 * outbox_relay only, in a schema of the app's choosing too.
 */
describe('outbox_due_tenants: the six-argument form lists what the two-argument form lists', () => {
  let db: TestDatabase;
  let server: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    [{ server } = { server: '' }] = await db.sql<{ server: string }>(`select ${SERVER_START} as server`);
  });
  afterEach(async () => {
    await truncateOutbox(db);
    await db.sql(`truncate outbox_consumer_pauses`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  function scan(
    positions: DuePositions | null,
    limit = 100,
    after: string | null = null,
    names: OutboxNames = outboxNames(),
  ): Promise<Due[]> {
    const statement = dueTenants(names, limit, after, positions);
    return db.sql<Due>(statement.text, [...statement.values]);
  }

  /** Inserts one event of `tenantId` in `status`; resolves with its id and seq. */
  async function event(tenantId: string, status: string): Promise<{ id: string; seq: bigint }> {
    const [row] = await db.sql<{ id: string; seq: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at)
       values (gen_random_uuid(), $1, $2, '{}'::jsonb, $3, case when $3 = 'published' then now() end)
       returning id, seq::text`,
      [tenantId, EVENT, status],
    );
    return { id: row!.id, seq: BigInt(row!.seq) };
  }

  async function lease(eventId: string, tenantId: string, expiresIn: string): Promise<void> {
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       values ($1, $2, gen_random_uuid(), now() + $3::interval)`,
      [eventId, tenantId, expiresIn],
    );
  }

  async function delivery(
    tenantId: string,
    consumer: string,
    status: string,
    at: { next?: string; lease?: string },
  ): Promise<void> {
    const { id, seq } = await event(tenantId, 'processing');
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, next_attempt_at,
                                      lease_token, lease_expires_at)
       values ($1, $2, $3, $4, $5, now() + coalesce($6::interval, '0'),
               case when $7::interval is not null then gen_random_uuid() end, now() + $7::interval)`,
      [id, tenantId, consumer, seq.toString(), status, at.next ?? null, at.lease ?? null],
    );
  }

  /**
   * A random mix of due and not-due work per tenant; resolves with, per tenant, a position no pending event of
   * it lies below (past its settled events, at its first pending one), or none.
   */
  async function fill(seed: number): Promise<[string, bigint][]> {
    const next = random(seed);
    const coin = (p = 0.3): boolean => next() < p;
    const positions: [string, bigint][] = [];
    if (coin(0.5))
      await db.sql(
        `insert into outbox_consumer_pauses (consumer_name, tenant_id, resumes_at) values ('c-all', null, $1)`,
        [coin(0.5) ? new Date(Date.now() + 3_600_000) : new Date(Date.now() - 3_600_000)],
      );
    for (const tenant of TENANTS) {
      let high = 0n;
      let firstPending: bigint | null = null;
      for (let i = Math.floor(next() * 3); i > 0; i--) high = (await event(tenant, 'published')).seq;
      for (let i = Math.floor(next() * 2); i > 0; i--) {
        const { seq } = await event(tenant, 'pending');
        firstPending ??= seq;
      }
      if (coin(0.2)) {
        // a lean claim's lease on a pending event, expired or live
        const { id, seq } = await event(tenant, 'pending');
        firstPending ??= seq;
        await lease(id, tenant, coin(0.5) ? '-1 minute' : '1 minute');
      }
      if (coin(0.25)) {
        // a fanned-out event whose relay never recorded it: lease expired (or still live)
        const { id, seq } = await event(tenant, 'processing');
        if (seq > high) high = seq;
        await lease(id, tenant, coin(0.6) ? '-1 minute' : '1 minute');
      }
      if (coin()) await delivery(tenant, 'c1', 'pending', {});
      if (coin()) await delivery(tenant, 'c1', 'pending', { next: '1 hour' });
      if (coin()) await delivery(tenant, 'c2', 'failed', {});
      if (coin()) await delivery(tenant, 'c-all', 'failed', {});
      if (coin()) await delivery(tenant, 'c1', 'processing', { lease: '-1 minute' });
      if (coin()) await delivery(tenant, 'c2', 'processing', { lease: '1 minute' });
      if (coin(0.2))
        await db.sql(
          `insert into outbox_consumer_pauses (consumer_name, tenant_id, resumes_at) values ('c1', $1, $2)`,
          [tenant, coin(0.5) ? null : new Date(Date.now() - 60_000)],
        );
      const [max] = await db.sql<{ seq: string | null }>(
        `select max(seq)::text as seq from event_outbox where tenant_id = $1`,
        [tenant],
      );
      if (max?.seq) high = BigInt(max.seq) > high ? BigInt(max.seq) : high;
      if (coin(0.6)) positions.push([tenant, firstPending ?? high + 1n]);
    }
    return positions;
  }

  function at(entries: [string, bigint][], leasesSince: string | null, on = server): DuePositions {
    return {
      tenants: entries.map(([t]) => t),
      seqs: entries.map(([, s]) => s.toString()),
      server: on,
      leasesSince,
    };
  }

  /** The pages the relay's planner would read, from `after` null, `limit` at a time, until one is short. */
  async function pages(positions: DuePositions | null, limit: number): Promise<Due[][]> {
    const read: Due[][] = [];
    let after: string | null = null;
    for (let i = 0; i < TENANTS.length + 2; i++) {
      const page = await scan(positions, limit, after);
      read.push(page);
      if (page.length < limit) break;
      after = page[page.length - 1]!.tenant_id;
    }
    return read;
  }

  it.each([1, 2, 3, 4, 5, 6, 7, 8])(
    'lists the same tenants, kinds and pages as the two-argument form (seed %i)',
    async (seed) => {
      const positioned = await fill(seed);
      const expected = await scan(null);
      const [{ since } = { since: '' }] = await db.sql<{ since: string }>(
        `select (now() - interval '1 hour')::text as since`,
      );
      for (const leasesSince of [null, since]) {
        const positions = at(positioned, leasesSince);
        expect(await scan(positions)).toEqual(expected);
        for (const limit of [1, 2, 3, 5])
          expect(await pages(positions, limit)).toEqual(await pages(null, limit));
      }
      // the two ends of the uuid order positioned as well (past every event: only their due deliveries count)
      const [top] = await db.sql<{ seq: string }>(
        `select coalesce(max(seq), 0)::text as seq from event_outbox`,
      );
      const ends = positioned.filter(([t]) => t !== NIL_UUID && t !== MAX_UUID);
      const past = BigInt(top!.seq) + 1n;
      const both = await scan(at([...ends, [NIL_UUID, past], [MAX_UUID, past]], null));
      const [endsDue] = await db.sql<{ n: string }>(
        `select count(*)::text as n from event_outbox where status = 'pending' and tenant_id in ($1, $2)`,
        [NIL_UUID, MAX_UUID],
      );
      if (endsDue!.n === '0') expect(both).toEqual(expected);
    },
  );

  it.each([11, 12, 13, 14, 15, 16])(
    'lists what the form of sql/0030 lists, whatever the positions and leasesSince (seed %i)',
    async (seed) => {
      // the previous six-argument form (sql/0030), beside the current one under another name: same listing for
      // any positions (above pending events too), any leasesSince, the server as each form reads it
      const previous = readFileSync(
        join(__dirname, '../../libs/outbox/sql/0030-outbox-due-tenants-past-settled.up.sql'),
        'utf8',
      )
        .replace(/^--.*$/gm, '')
        .replace(/public\.outbox_due_tenants\(/g, 'public.outbox_due_tenants_0030(')
        .replace(/^(revoke|grant) .*$/gm, '');
      await db.sql(previous);
      try {
        await fill(seed);
        const next = random(seed * 7919);
        const [{ old } = { old: '' }] = await db.sql<{ old: string }>(
          `select pg_postmaster_start_time()::text as old`,
        );
        const [{ top } = { top: '0' }] = await db.sql<{ top: string }>(
          `select coalesce(max(seq), 0)::text as top from event_outbox`,
        );
        for (let round = 0; round < 12; round++) {
          const entries: [string, bigint][] = TENANTS.filter(() => next() < 0.6).map((t) => [
            t,
            BigInt(Math.floor(next() * (Number(top) + 3))),
          ]);
          const since = [null, '-1 hour', '-30 seconds', '0 seconds', '1 hour'][Math.floor(next() * 5)]!;
          const [{ at: leasesSince } = { at: null }] = await db.sql<{ at: string | null }>(
            `select to_char((now() + $1::interval) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at`,
            [since],
          );
          const limit = [1, 3, 100][Math.floor(next() * 3)]!;
          const after = next() < 0.5 ? null : TENANTS[Math.floor(next() * TENANTS.length)]!;
          const current = at(entries, leasesSince);
          const args = [limit, after, current.tenants, current.seqs, old, leasesSince];
          const was = await db.sql<Due>(
            `select * from outbox_due_tenants_0030($1, $2, $3::uuid[], $4::bigint[], $5, $6::timestamptz)`,
            args,
          );
          expect({ round, rows: await scan(current, limit, after) }).toEqual({ round, rows: was });
        }
      } finally {
        await db.sql(
          `drop function outbox_due_tenants_0030(integer, uuid, uuid[], bigint[], text, timestamptz)`,
        );
      }
    },
  );

  it('lists a positioned tenant whose only due work is a retry or an expired delivery lease, not a paused one', async () => {
    const [a, b, c] = [TENANTS[3]!, TENANTS[6]!, MAX_UUID];
    for (const t of [a, b, c]) await event(t, 'published');
    await delivery(a, 'c1', 'failed', {});
    await delivery(b, 'c1', 'processing', { lease: '-1 second' });
    await delivery(c, 'c1', 'pending', {});
    const [top] = await db.sql<{ seq: string }>(`select max(seq)::text as seq from event_outbox`);
    const past = BigInt(top!.seq) + 1n;
    const positions = at(
      [
        [a, past],
        [b, past],
        [c, past],
      ],
      null,
    );
    const kinds = [a, b, c].map((tenant_id) => ({ tenant_id, has_new: false, has_due: true }));
    expect(await scan(positions)).toEqual(kinds);
    expect(await scan(null)).toEqual(kinds);
    await db.sql(`insert into outbox_consumer_pauses (consumer_name, tenant_id) values ('c1', $1)`, [b]);
    expect(await scan(positions)).toEqual([kinds[0], kinds[2]]);
  });

  it('is SECURITY DEFINER with its search_path pinned, executable by outbox_relay only', async () => {
    const fn = await security(db, outboxNames());
    expect(fn).toEqual({
      definer: true,
      config: ['search_path=pg_catalog, public', 'plan_cache_mode=force_generic_plan'],
      relay: true,
      app: false,
      open: false,
    });
    // a member of outbox_relay, under row-level security, sees every tenant's due work through it
    const { seq } = await event(TENANTS[4]!, 'pending');
    const relay = await createLoginRole(db, 'outbox_relay');
    const app = await createLoginRole(db, 'outbox_app');
    try {
      const statement = dueTenants(outboxNames(), 10, null, at([[TENANTS[4]!, seq]], null));
      expect(await relay.sql(statement.text, [...statement.values])).toEqual([
        { tenant_id: TENANTS[4], has_new: true, has_due: false },
      ]);
      await expect(app.sql(statement.text, [...statement.values])).rejects.toThrow(/permission denied/);
    } finally {
      await relay.drop();
      await app.drop();
    }
  });
});

describe('outbox_due_tenants: the six-argument form in another schema', () => {
  const BILLING = 'billing';
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateOutbox(db, BILLING);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("reads its own schema's tables, definer with that schema pinned, for outbox_relay only", async () => {
    const names = outboxNames(BILLING);
    const fn = await security(db, names);
    expect(fn).toEqual({
      definer: true,
      config: ['search_path=pg_catalog, billing', 'plan_cache_mode=force_generic_plan'],
      relay: true,
      app: false,
      open: false,
    });
    const [{ server } = { server: '' }] = await db.sql<{ server: string }>(
      `select ${SERVER_START} as server`,
    );
    const tenant = TENANTS[5]!;
    const [row] = await db.sql<{ seq: string }>(
      `insert into ${names.events} (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, $2, '{}')
       returning seq::text`,
      [tenant, EVENT],
    );
    const positions = { tenants: [tenant], seqs: [row!.seq], server, leasesSince: null };
    const inBilling = dueTenants(names, 10, null, positions);
    const inPublic = dueTenants(outboxNames(), 10, null, positions);
    const relay = await createLoginRole(db, 'outbox_relay');
    try {
      expect(await relay.sql(inBilling.text, [...inBilling.values])).toEqual([
        { tenant_id: tenant, has_new: true, has_due: false },
      ]);
      expect(await relay.sql(inPublic.text, [...inPublic.values])).toEqual([]);
      // past the event: from the position, nothing; the two-argument form still lists it
      const past = { ...positions, seqs: [String(BigInt(row!.seq) + 1n)] };
      const fromPast = dueTenants(names, 10, null, past);
      expect(await relay.sql(fromPast.text, [...fromPast.values])).toEqual([]);
      const two = dueTenants(names, 10, null, null);
      expect(await relay.sql(two.text, [...two.values])).toHaveLength(1);
    } finally {
      await relay.drop();
    }
  });
});

@Injectable()
class Seen {
  readonly ids: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'due-six' })
  handle(event: OutboxEvent): void {
    this.ids.push(event.eventId);
  }
}

describe('a relay without claim positions', () => {
  const SIX = 'integer, uuid, uuid[], bigint[], text, timestamptz';
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('scans with the two-argument form only (the six-argument one renamed away), one with positions does not', async () => {
    await db.sql(`alter function outbox_due_tenants(${SIX}) rename to outbox_due_tenants_off`);
    for (const claimPositions of [null, undefined]) {
      const t = await buildApp({
        url: db.url,
        providers: [Seen],
        imports: claimPositions === null ? [PolicySwitches.of({ claimPositions })] : [],
        logger: false,
      });
      try {
        const seen = t.app.get(Seen);
        // written without a wake-up: only the scan finds it
        const [row] = await db.sql<{ id: string }>(
          `insert into event_outbox (id, tenant_id, event_name, payload)
           values (gen_random_uuid(), $1, $2, '{}'::jsonb) returning id`,
          [TENANTS[2], EVENT],
        );
        if (claimPositions === null) {
          const deadline = Date.now() + 10_000;
          while (!seen.ids.includes(row!.id)) {
            if (Date.now() > deadline) throw new Error('not handled within 10 s');
            await t.relay.runOnce();
          }
        } else {
          await expect(t.relay.runOnce()).rejects.toThrow(/outbox_due_tenants/);
          await db.sql(`delete from event_outbox where id = $1`, [row!.id]);
        }
      } finally {
        await t.close();
      }
    }
    await db.sql(`alter function outbox_due_tenants_off(${SIX}) rename to outbox_due_tenants`);
  });
});
