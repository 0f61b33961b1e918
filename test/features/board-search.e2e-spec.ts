import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import {
  OnOutboxEvent,
  OutboxRelay,
  OutboxService,
  OutboxValidationError,
  type OutboxEvent,
  type OutboxEventInput,
} from 'nestjs-pg-outbox';
import { OutboxAdminModule, OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { DataSource } from 'typeorm';
import { buildHttpApp, type HttpTestApp } from '../support/http-app';
import { TYPESCRIPT_NODE_ARGS } from '../support/child-relay';
import { OperatorGuard, boardFormSession, tenantsOf } from '../support/board-operators';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANTS } from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { searchEvents } from '../../libs/outbox/src/store/sql/event-search';

const [TENANT_A, TENANT_B] = TENANTS;

/** Bills every bulk-test event; fails while `broken`, dead at the first failure. */
@Injectable()
class BillingConsumer {
  broken = true;

  @OnOutboxEvent('test.bulk.*', { consumer: 'billing', maxAttempts: 1 })
  bill(event: OutboxEvent): void {
    if (this.broken) throw new Error(`card declined for ${event.eventId}`);
  }
}

let db: TestDatabase;
let http: HttpTestApp;
let admin: OutboxAdminService;
let billing: BillingConsumer;

async function enqueue(events: OutboxEventInput<unknown>[]): Promise<string[]> {
  const dataSource = http.app.get(DataSource);
  const ids: string[] = [];
  // one transaction each: ids (UUIDv7) in the order given, as the search's newest-first order expects
  for (const event of events)
    ids.push(await dataSource.transaction((m) => http.app.get(OutboxService).enqueue(m, event)));
  return ids;
}

const bulkEvents = (tenantId: string, eventName: string, count: number): OutboxEventInput<unknown>[] =>
  Array.from({ length: count }, (_, i) => ({ tenantId, eventName, payload: { i } }));

/** Billing's deliveries of `ids` per status, e.g. `{ dead: 3 }`. */
async function billingStatuses(ids: readonly string[]): Promise<Record<string, number>> {
  const rows = await db.sql<{ status: string; n: number }>(
    `select status, count(*)::int as n from outbox_deliveries
      where consumer_name = 'billing' and event_id = any($1::uuid[]) group by status`,
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

const auditOf = (tenantId: string, action: string) =>
  db.sql<{ actor: string; rows_affected: number; target: Record<string, unknown> }>(
    `select actor, rows_affected, target from outbox_audit where tenant_id = $1 and action = $2`,
    [tenantId, action],
  );

/**
 * What `npx nestjs-pg-outbox sql --search-indexes --url <the spec's database>` prints (the steps for its layout),
 * run from the source like the packaged command.
 */
function searchIndexesSql(): string {
  const cli = join(__dirname, '..', '..', 'libs', 'outbox', 'src', 'cli', 'outbox-cli.ts');
  const run = spawnSync(
    process.execPath,
    [...TYPESCRIPT_NODE_ARGS, cli, 'sql', '--search-indexes', '--url', db.url],
    { encoding: 'utf8' },
  );
  if (run.status !== 0) throw new Error(`nestjs-pg-outbox sql --search-indexes failed: ${run.stderr}`);
  return run.stdout;
}

/** The indexes of `event_outbox` that the plan of the tenant's search walks, sequential scans named too. */
async function searchPlan(query: Parameters<typeof searchEvents>[1]): Promise<string[]> {
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    // a handful of rows: the planner would read the table whatever the indexes; ask what it does when it cannot
    await client.query('begin');
    await client.query('set local enable_seqscan = off');
    const statement = searchEvents(outboxNames(), query);
    const rows = (await client.query<{ 'QUERY PLAN': string }>(`explain ${statement.text}`, statement.values))
      .rows;
    // in the partitioned layout, each partition's index of it (named after it, with the partition's suffix)
    const scans = rows
      .flatMap((r) => [
        ...r['QUERY PLAN'].matchAll(
          /(?:Index|Index Only|Seq) Scan(?: Backward)? (?:using (\w+) )?on event_outbox/g,
        ),
      ])
      .map((m) => m[1]?.replace(/_(?:p\d{8}t\d{4}|default)$/, '') ?? 'seq scan');
    return [...new Set(scans)];
  } finally {
    await client.query('rollback');
    await client.end();
  }
}

/** A board page read as alice's browser: its CSRF cookie and the token its forms carry. */
const boardSession = () => boardFormSession(`${http.baseUrl}/outbox/board/t/${TENANT_A}/failures`);

/** A form post to the board, as alice (the guard lets her in): status, Location and body. */
async function boardPost(
  page: 'confirm' | 'act',
  fields: Record<string, string>,
  headers: Record<string, string>,
): Promise<{ status: number; location: string | null; body: string }> {
  const response = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}/${page}`, {
    method: 'POST',
    headers: { 'x-operator': 'alice', 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
  return { status: response.status, location: response.headers.get('location'), body: await response.text() };
}

/** A JSON call to the admin routes, as root. */
async function adminCall(
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${http.baseUrl}/outbox/${path}`, {
    method,
    headers: { 'x-operator': 'root', 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  db = await createTestDatabase();
  http = await buildHttpApp({
    url: db.url,
    outbox: { tenancy: 'multi', relay: { enabled: true, pollIntervalMs: 50 } },
    providers: [BillingConsumer, OperatorGuard],
    imports: [
      OutboxAdminModule.forRoot({ guards: [OperatorGuard] }),
      OutboxBoardModule.forRoot({ guards: [OperatorGuard], tenants: tenantsOf }),
    ],
  });
  admin = http.app.get(OutboxAdminService);
  billing = http.app.get(BillingConsumer);
});

afterAll(async () => {
  await http?.close();
  expect(http ? http.app.get(OutboxRelay).isRunning : false).toBe(false);
  await db?.drop();
});

describe('searching events by id, aggregate, correlation id and name', () => {
  let ids: Record<'e1' | 'e2' | 'e3' | 'other' | 'b1', string>;

  beforeAll(async () => {
    const [e1, e2, e3, other, b1] = await enqueue([
      {
        tenantId: TENANT_A,
        eventName: 'test.search.placed.v1',
        aggregateType: 'order',
        aggregateId: 'O-1',
        correlationId: 'req-1',
        payload: {},
      },
      {
        tenantId: TENANT_A,
        eventName: 'test.search.paid.v1',
        aggregateType: 'order',
        aggregateId: 'O-1',
        correlationId: 'req-2',
        payload: {},
      },
      {
        tenantId: TENANT_A,
        eventName: 'test.search.placed.v1',
        aggregateType: 'invoice',
        aggregateId: 'O-1',
        payload: {},
      },
      { tenantId: TENANT_A, eventName: 'test.search.other.v1', payload: {} },
      // another tenant's event with the same fields as e1
      {
        tenantId: TENANT_B,
        eventName: 'test.search.placed.v1',
        aggregateType: 'order',
        aggregateId: 'O-1',
        correlationId: 'req-1',
        payload: {},
      },
    ]);
    ids = { e1: e1!, e2: e2!, e3: e3!, other: other!, b1: b1! };
  });

  const found = async (query: Parameters<OutboxAdminService['searchEvents']>[1], tenant: string = TENANT_A) =>
    (await admin.searchEvents(tenant, query)).items.map((e) => e.eventId);

  it("finds each field's events of the tenant, newest first, and not another tenant's", async () => {
    expect(await found({ eventId: ids.e1 })).toEqual([ids.e1]);
    expect(await found({ eventId: ids.b1 })).toEqual([]);
    expect(await found({ aggregateType: 'order', aggregateId: 'O-1' })).toEqual([ids.e2, ids.e1]);
    expect(await found({ aggregateId: 'O-1' })).toEqual([ids.e3, ids.e2, ids.e1]);
    expect(await found({ correlationId: 'req-1' })).toEqual([ids.e1]);
    expect(await found({ correlationId: 'req-2' })).toEqual([ids.e2]);
    expect(await found({ eventName: 'test.search.placed.v1' })).toEqual([ids.e3, ids.e1]);
    expect(
      await found({ eventName: 'test.search.placed.v1', aggregateType: 'order', aggregateId: 'O-1' }),
    ).toEqual([ids.e1]);
    expect(await found({ correlationId: 'req-1' }, TENANT_B)).toEqual([ids.b1]);

    const [match] = (await admin.searchEvents(TENANT_A, { eventId: ids.e1 })).items;
    expect(match).toMatchObject({
      eventName: 'test.search.placed.v1',
      aggregateType: 'order',
      aggregateId: 'O-1',
      correlationId: 'req-1',
    });
  });

  it('pages with the last id seen, and says when there is no next page', async () => {
    const pages: string[][] = [];
    let beforeId: string | undefined;
    for (let i = 0; i < 5; i++) {
      const page = await admin.searchEvents(TENANT_A, { aggregateId: 'O-1', limit: 1, beforeId });
      pages.push(page.items.map((e) => e.eventId));
      if (page.nextBeforeId === null) break;
      beforeId = page.nextBeforeId;
    }
    expect(pages).toEqual([[ids.e3], [ids.e2], [ids.e1]]);
  });

  it('refuses a search without a searchable field, or with an aggregate type alone, naming the field', async () => {
    const refused = async (query: Parameters<OutboxAdminService['searchEvents']>[1]) => {
      const error = (await admin.searchEvents(TENANT_A, query).catch((e: unknown) => e)) as Error;
      expect(error).toBeInstanceOf(OutboxValidationError);
      return (error as OutboxValidationError).field;
    };
    expect(await refused({})).toBe('search');
    expect(await refused({ aggregateType: 'order' })).toBe('aggregateId');
    expect(await refused({ eventId: 'not-a-uuid' })).toBe('eventId');
    expect(await refused({ eventName: 'Not A Name' })).toBe('eventName');
    expect(await refused({ correlationId: 'x', beforeId: '42' })).toBe('beforeId');
  });

  it('answers on the admin route, and 400 naming the field', async () => {
    const ok = await adminCall('GET', `tenants/${TENANT_A}/events?correlationId=req-1`);
    expect(ok.status).toBe(200);
    expect((ok.json.items as { eventId: string }[]).map((e) => e.eventId)).toEqual([ids.e1]);
    expect(ok.json.nextBeforeId).toBeNull();
    const bad = await adminCall('GET', `tenants/${TENANT_A}/events?aggregateType=order`);
    expect(bad).toMatchObject({ status: 400, json: { field: 'aggregateId' } });
  });

  it("shows the results on the board's search page, to an operator of the tenant only", async () => {
    const page = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}/search?aggregateId=O-1`, {
      headers: { 'x-operator': 'alice' },
    });
    expect(page.status).toBe(200);
    const body = await page.text();
    const rows = [...body.matchAll(/<tr data-event-id="([\w-]+)">/g)].map((m) => m[1]);
    expect(rows).toEqual([ids.e3, ids.e2, ids.e1]);
    expect(body).toMatch(/<a href="[^"]*\/search"\s+aria-current="page"\s*>Search<\/a/);

    const empty = await (
      await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}/search`, { headers: { 'x-operator': 'alice' } })
    ).text();
    expect(empty).toContain('data-testid="search-form"');
    expect(empty).not.toContain('data-testid="search-results"');

    const theirs = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_B}/search?correlationId=req-1`, {
      headers: { 'x-operator': 'alice' },
    });
    expect(theirs.status).toBe(403);
    expect(await theirs.text()).not.toContain(ids.b1);

    const bad = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}/search?aggregateType=order`, {
      headers: { 'x-operator': 'alice' },
    });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('aggregateType is searched together with aggregateId');
  });

  it('stops a search that runs past its bound, saying to add the search indexes and how', async () => {
    // the table held by another session: the search waits until its statement timeout, as a long read would
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('lock table event_outbox in access exclusive mode');
      const error = (await admin
        .searchEvents(TENANT_A, { eventName: 'test.search.placed.v1' })
        .catch((e: unknown) => e)) as OutboxValidationError;
      expect(error).toBeInstanceOf(OutboxValidationError);
      expect(error.field).toBe('eventName');
      expect(error.message).toContain('without the search indexes');
      expect(error.message).toContain('npx nestjs-pg-outbox sql --search-indexes');
      const routed = await adminCall('GET', `tenants/${TENANT_A}/events?correlationId=req-1`);
      expect(routed).toMatchObject({ status: 400, json: { field: 'correlationId' } });
      expect(routed.json.message).toContain('sql --search-indexes');
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
  });

  it('finds the same events through the opt-in search indexes, each search one index range', async () => {
    const before = [
      await found({ aggregateId: 'O-1' }),
      await found({ correlationId: 'req-1' }),
      await found({ eventName: 'test.search.placed.v1' }),
    ];
    expect(await searchPlan({ ...PLAN_QUERY, eventName: 'test.search.placed.v1' })).not.toContain(
      'event_outbox_name_idx',
    );

    const statements = searchIndexesSql()
      .split(';\n')
      .filter((s) => s.trim() !== '');
    // partitioned: on the parent alone, then on each partition concurrently and attached (docs/partitioning.md)
    const [{ partitions }] = (await db.sql<{ partitions: number }>(
      `select count(*)::int as partitions from pg_partition_tree('event_outbox') where isleaf`,
    )) as [{ partitions: number }];
    expect(statements).toHaveLength(3 * (partitions === 0 ? 1 : 1 + 2 * partitions));
    for (const statement of statements) await db.sql(statement); // concurrently: one at a time, no transaction

    expect([
      await found({ aggregateId: 'O-1' }),
      await found({ correlationId: 'req-1' }),
      await found({ eventName: 'test.search.placed.v1' }),
    ]).toEqual(before);
    expect(await searchPlan({ ...PLAN_QUERY, eventName: 'test.search.placed.v1' })).toEqual([
      'event_outbox_name_idx',
    ]);
    expect(await searchPlan({ ...PLAN_QUERY, aggregateId: 'O-1' })).toEqual(['event_outbox_aggregate_idx']);
    expect(await searchPlan({ ...PLAN_QUERY, correlationId: 'req-1' })).toEqual([
      'event_outbox_correlation_idx',
    ]);
    // a second run changes nothing (if not exists)
    for (const statement of statements) await db.sql(statement);
  });
});

/** A page of tenant A's search for the plans: no field but those a test adds. */
const PLAN_QUERY = {
  tenantId: TENANT_A!,
  ...Object.fromEntries(
    ['eventId', 'aggregateType', 'aggregateId', 'correlationId', 'eventName', 'beforeId'].map((f) => [
      f,
      null,
    ]),
  ),
  limit: 51,
} as Parameters<typeof searchEvents>[1];

describe('bulk replay and purge of what matches a filter', () => {
  let a: string[];
  let aOther: string[];
  let b: string[];

  beforeAll(async () => {
    billing.broken = true;
    a = await enqueue(bulkEvents(TENANT_A, 'test.bulk.a.v1', 10));
    aOther = await enqueue(bulkEvents(TENANT_A, 'test.bulk.b.v1', 3));
    b = await enqueue(bulkEvents(TENANT_B, 'test.bulk.a.v1', 4));
    const all = [...a, ...aOther, ...b];
    await waitFor(async () => (await billingStatuses(all)).dead === all.length, {
      message: 'every billing delivery dead',
    });
  });

  it('replays, in chunks, exactly what the dry run counted, and writes one audit row', async () => {
    const filter = { consumer: 'billing', status: 'dead' as const, eventName: 'test.bulk.a.v1' };
    const dryRun = await admin.replayMatching(TENANT_A, { ...filter, dryRun: true });
    expect(dryRun).toEqual({ dryRun: true, count: 10, chunks: 0 });
    expect(await auditOf(TENANT_A, 'replayMatching')).toEqual([]);
    // a created-at range that holds none of them
    expect(
      (await admin.replayMatching(TENANT_A, { ...filter, from: new Date(Date.now() + 60_000), dryRun: true }))
        .count,
    ).toBe(0);
    expect(
      (
        await admin.replayMatching(TENANT_A, {
          ...filter,
          to: new Date(Date.now() - 3_600_000),
          dryRun: true,
        })
      ).count,
    ).toBe(0);

    billing.broken = false;
    const done = await admin.replayMatching(
      TENANT_A,
      { ...filter, chunkSize: 3 },
      { audit: { actor: 'bob' } },
    );
    // 10 rows in chunks of 3: 3 + 3 + 3 + 1
    expect(done).toEqual({ dryRun: false, count: 10, chunks: 4 });
    await waitFor(async () => (await billingStatuses(a)).delivered === a.length, {
      message: 'the replayed deliveries delivered',
    });
    // the other event name, and the other tenant, untouched
    expect(await billingStatuses(aOther)).toEqual({ dead: 3 });
    expect(await billingStatuses(b)).toEqual({ dead: 4 });
    const audit = await auditOf(TENANT_A, 'replayMatching');
    expect(audit).toEqual([
      {
        actor: 'bob',
        rows_affected: 10,
        target: { consumer: 'billing', eventName: 'test.bulk.a.v1', statuses: ['dead'] },
      },
    ]);
    expect(await auditOf(TENANT_B, 'replayMatching')).toEqual([]);
  });

  it('refuses a forged bulk post (no CSRF token): 403, nothing purged, no audit row', async () => {
    const fields = {
      action: 'purge-matching',
      consumer: 'billing',
      status: 'dead',
      eventName: 'test.bulk.b.v1',
    };
    const mine = await boardSession();
    for (const [page, headers] of [
      ['act', { origin: 'null' }],
      ['act', { cookie: mine.cookie, origin: 'null' }],
      ['confirm', { cookie: mine.cookie }],
    ] as const)
      expect({ page, headers, status: (await boardPost(page, fields, headers)).status }).toEqual({
        page,
        headers,
        status: 403,
      });
    expect(await billingStatuses(aOther)).toEqual({ dead: 3 });
    expect(await auditOf(TENANT_A, 'purgeMatching')).toEqual([]);
  });

  it('purges from the board what its confirmation page counted, with one audit row', async () => {
    const mine = await boardSession();
    const fields = {
      action: 'purge-matching',
      consumer: 'billing',
      status: 'dead',
      eventName: 'test.bulk.b.v1',
      _csrf: mine.token,
    };
    const confirm = await boardPost('confirm', fields, { cookie: mine.cookie, origin: 'null' });
    expect(confirm.status).toBe(200);
    const counted = Number(/data-testid="dry-run-count">(\d+)</.exec(confirm.body)?.[1]);
    expect(counted).toBe(3);
    expect(await billingStatuses(aOther)).toEqual({ dead: 3 });

    const act = await boardPost('act', fields, { cookie: mine.cookie, origin: 'null' });
    expect(act.status).toBe(303);
    expect(act.location).toMatch(
      /\/failures\?consumer=billing&eventName=test\.bulk\.b\.v1&done=bulk-purged&n=3$/,
    );
    expect(await db.sql(`select 1 from event_outbox where id = any($1::uuid[])`, [aOther])).toEqual([]);
    expect(await billingStatuses(b)).toEqual({ dead: 4 });
    expect(await auditOf(TENANT_A, 'purgeMatching')).toEqual([
      {
        actor: 'alice',
        rows_affected: counted,
        target: { consumer: 'billing', eventName: 'test.bulk.b.v1', statuses: ['dead'] },
      },
    ]);
  });

  it('answers a bad filter with 400 naming the field, on the admin routes and on the board', async () => {
    for (const [body, field] of [
      [{ status: 'delivered' }, 'status'],
      [{ from: 'yesterday' }, 'from'],
      [{ from: '2026-12-02', to: '2026-12-01' }, 'to'],
      [{ eventName: 'Bad Name' }, 'eventName'],
      [{ chunkSize: 0 }, 'chunkSize'],
      [{ dryRun: 'yes' }, 'dryRun'],
    ] as const) {
      const answer = await adminCall('POST', `tenants/${TENANT_B}/bulk/replay`, body);
      expect({ body, status: answer.status, field: answer.json.field }).toEqual({ body, status: 400, field });
    }
    const purgeFailed = await adminCall('POST', `tenants/${TENANT_B}/bulk/purge`, { status: 'failed' });
    expect(purgeFailed).toMatchObject({ status: 400, json: { field: 'status' } });

    const mine = await boardSession();
    const confirm = await boardPost(
      'confirm',
      { action: 'replay-matching', from: 'last tuesday', _csrf: mine.token },
      { cookie: mine.cookie, origin: 'null' },
    );
    expect(confirm.status).toBe(400);
    expect(confirm.body).toContain('from must be a valid Date');
    expect(await billingStatuses(b)).toEqual({ dead: 4 });
    expect(await auditOf(TENANT_B, 'replayMatching')).toEqual([]);
  });

  it("refuses the search and the bulk routes to a caller the app's guard refuses, changing nothing", async () => {
    const anonymous = (path: string, method = 'GET') =>
      fetch(`${http.baseUrl}/outbox/${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: method === 'POST' ? '{}' : undefined,
      }).then((r) => r.status);
    expect(await anonymous(`tenants/${TENANT_B}/events?eventName=test.bulk.a.v1`)).toBe(403);
    expect(await anonymous(`tenants/${TENANT_B}/bulk/replay`, 'POST')).toBe(403);
    expect(await anonymous(`tenants/${TENANT_B}/bulk/purge`, 'POST')).toBe(403);
    expect(await anonymous(`board/t/${TENANT_A}/search?eventName=test.bulk.a.v1`)).toBe(403);
    expect(await billingStatuses(b)).toEqual({ dead: 4 });
    expect(await auditOf(TENANT_B, 'purgeMatching')).toEqual([]);
  });

  it('purges on the admin route in chunks what its dry run counted, audited once', async () => {
    const dryRun = await adminCall('POST', `tenants/${TENANT_B}/bulk/purge`, { dryRun: true });
    expect(dryRun).toEqual({ status: 200, json: { dryRun: true, count: 4, chunks: 0 } });
    const done = await adminCall('POST', `tenants/${TENANT_B}/bulk/purge`, {
      consumer: 'billing',
      chunkSize: 3,
    });
    expect(done).toEqual({ status: 200, json: { dryRun: false, count: 4, chunks: 2 } });
    expect(await db.sql(`select 1 from event_outbox where id = any($1::uuid[])`, [b])).toEqual([]);
    expect(await auditOf(TENANT_B, 'purgeMatching')).toEqual([
      { actor: 'root', rows_affected: 4, target: { consumer: 'billing', statuses: ['dead'] } },
    ]);
    // tenant A's replayed events are delivered, not purged
    expect(await billingStatuses(a)).toEqual({ delivered: 10 });
  });
});

describe("the overview's chart over hours", () => {
  it('draws the last 6 and 24 hours in buckets from the per-minute activity, and keeps the span live', async () => {
    // activity 5 hours ago: outside the 30-minute chart, inside the 6-hour one
    await db.sql(
      `insert into outbox_activity (tenant_id, minute, consumer_name, delivered, failed, dead)
       values ($1, date_trunc('minute', now()) - interval '5 hours', 'billing', 7, 2, 1)`,
      [TENANT_A],
    );
    const read = async (query: string) =>
      (
        await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}${query}`, {
          headers: { 'x-operator': 'alice' },
        })
      ).text();
    const barsOf = (page: string) => [...page.matchAll(/<rect\s+class="bar-ok"/g)].length;
    const fiveHoursAgo = (page: string) =>
      /<td>\d\d:\d\d<\/td>\s*<td>7<\/td>\s*<td>2<\/td>\s*<td>1<\/td>/.test(page);

    const recent = await read('');
    expect(barsOf(recent)).toBe(30);
    expect(fiveHoursAgo(recent)).toBe(false);
    const six = await read('?range=6h');
    expect(six).toContain('Deliveries per 5 minutes, last 6 hours');
    expect(barsOf(six)).toBe(72);
    expect(fiveHoursAgo(six)).toBe(true);
    expect(six).toMatch(/data-live-src="[^"]*\/fragments\/overview\?range=6h"/);
    const day = await read('?range=24h');
    expect(barsOf(day)).toBe(72);
    expect(fiveHoursAgo(day)).toBe(true);
    const fragment = await read('/fragments/overview?range=24h');
    expect(fragment).toContain('Deliveries per 20 minutes, last 24 hours');
    // an unknown span falls back to the default chart
    expect(barsOf(await read('?range=1y'))).toBe(30);
  });
});
