/**
 * `node -r @swc-node/register bench/board-plans.ts`: the board's statements on a large tenant, with their plans.
 * Builds a throwaway database (on `DATABASE_URL`, else an embedded PostgreSQL) with `EVENTS` events of one tenant
 * (plus four smaller tenants), two consumers each — nearly all delivered, some pending, failed and dead — then
 * prints `explain (analyze, buffers)` of every statement the board runs per refresh and fails when one of them
 * reads the big tables sequentially. The figures of docs/adr/0401-board-reads-bounded-queries.md come from here, and
 * those of docs/adr/1013-search-bulk-actions-and-hours-of-activity.md (EVENTS=100000, and FAILED_EVERY=10).
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { outboxMigrations } from '../libs/outbox/src';
import * as bq from '../libs/outbox/src/admin/board-sql';
import { tenantStats } from '../libs/outbox/src/store/sql/admin';
import * as sq from '../libs/outbox/src/store/sql/event-search';
import * as bk from '../libs/outbox/src/store/sql/bulk-actions';
import { searchIndexesSql } from '../libs/outbox/src/maintenance/outbox-indexes';
import { outboxNames, type SqlStatement } from '../libs/outbox/src/store/sql';
import { resolveDatabase } from '../tools/database-url';

/** A search of the big tenant, one page (the fields set per statement below). */
const SEARCH: sq.EventSearch = {
  tenantId: '11111111-1111-4111-8111-111111111111',
  eventId: null,
  aggregateType: null,
  aggregateId: null,
  correlationId: null,
  eventName: null,
  beforeId: null,
  limit: 51,
};
/** An event id of the big tenant, filled in once the rows exist. */
let SOME_EVENT = '';
/** A bulk action's filter on the big tenant: billing's dead deliveries of one event name in the last day. */
const BULK: bk.BulkFilter = {
  tenantId: '11111111-1111-4111-8111-111111111111',
  consumer: 'billing',
  statuses: ['dead'],
  eventName: 'crm.contact.updated.v1',
  from: new Date(Date.now() - 86_400_000),
  to: null,
};

/** The outbox's names in the default schema, which these statements run against. */
const NAMES = outboxNames();

const EVENTS = Number(process.env.EVENTS ?? 1_000_000);
/** One event in this many failed, dead for billing (2,000; 10 for the bulk actions' figures of ADR 1013). */
const FAILED_EVERY = Math.max(2, Number(process.env.FAILED_EVERY ?? 2000));
const TENANT = '11111111-1111-4111-8111-111111111111';

/** The plan's lines, with JIT off as in the board's transactions (see setBoardContext). */
async function explain(
  db: Client,
  options: string,
  statement: SqlStatement,
): Promise<Record<string, string>[]> {
  await db.query('set jit = off');
  // bound parameters, as the board sends them (a custom plan: explain plans for these values)
  return (await db.query(`explain (${options}) ${statement.text}`, statement.values as unknown[])).rows;
}

async function main(): Promise<void> {
  const server = await resolveDatabase();
  const name = `outbox_plans_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: server.url });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const migrator = new DataSource({ type: 'postgres', url: url.toString(), migrations: outboxMigrations });
  await migrator.initialize();
  await migrator.runMigrations({ transaction: 'each' });
  // the search's opt-in indexes (ADR 1013), as `npx nestjs-pg-outbox sql --search-indexes` prints them
  for (const statement of searchIndexesSql('public')
    .split(';\n')
    .filter((s) => s.trim() !== ''))
    await migrator.query(statement);
  await migrator.destroy();
  const db = new Client({ connectionString: url.toString() });
  await db.connect();
  try {
    const started = Date.now();
    // the big tenant: EVENTS events; every 1000th pending, every FAILED_EVERY-th failed (one dead delivery), the rest published
    await db.query(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at, failed_at, deliveries_dead, created_at,
                                 aggregate_type, aggregate_id, correlation_id)
       select gen_random_uuid(), $1, (array['crm.contact.created.v1', 'crm.contact.updated.v1', 'orders.placed.v1',
                                           'orders.paid.v1', 'orders.shipped.v1'])[g % 5 + 1], jsonb_build_object('n', g),
              case when g % 1000 = 0 then 'pending' when g % ${FAILED_EVERY} = 1 then 'failed' else 'published' end,
              case when g % 1000 <> 0 and g % ${FAILED_EVERY} <> 1 then now() - (g || ' seconds')::interval end,
              case when g % ${FAILED_EVERY} = 1 then now() end, case when g % ${FAILED_EVERY} = 1 then 1 else 0 end,
              now() - ((${EVENTS} - g) || ' seconds')::interval,
              -- ten events per aggregate, five per correlation id (one request), one in ten without either
              case when g % 10 <> 0 then 'contact' end, case when g % 10 <> 0 then 'C-' || (g % ($2 / 10)) end,
              case when g % 10 <> 0 then 'req-' || (g / 5) end
         from generate_series(1, $2) g`,
      [TENANT, EVENTS],
    );
    for (let t = 0; t < 4; t++) {
      await db.query(
        `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at)
         select gen_random_uuid(), gen_random_uuid(), 'crm.contact.created.v1', '{}'::jsonb, 'published', now()
           from generate_series(1, $1) g`,
        [EVENTS / 10],
      );
    }
    await db.query(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, error_code, last_error, processed_at)
       select e.id, e.tenant_id, c.name, e.seq,
              case when e.status = 'pending' then 'pending'
                   when e.status = 'failed' and c.name = 'billing' then 'dead' else 'delivered' end,
              case when e.status = 'failed' and c.name = 'billing' then 5 else 1 end,
              case when e.status = 'failed' and c.name = 'billing' then 'handlerError' end,
              case when e.status = 'failed' and c.name = 'billing' then 'Error: card declined' end,
              case when e.status <> 'pending' then now() end
         from event_outbox e cross join (values ('billing'), ('welcome-email')) as c(name)`,
    );
    await db.query(
      `insert into outbox_consumers (name, event_patterns) values ('billing', '{crm.*}'), ('welcome-email', '{crm.*}')`,
    );
    // a day of activity, every minute, for both consumers (what the 24-hour chart reads), of this tenant and 49 more
    await db.query(
      `insert into outbox_activity (tenant_id, minute, consumer_name, delivered, failed, dead)
       select t, date_trunc('minute', now()) - m * interval '1 minute', c, 100, 2, 1
         from unnest(array[$1::uuid] || array(select gen_random_uuid() from generate_series(1, 49))) t
        cross join generate_series(0, 1439) m cross join (values ('billing'), ('welcome-email')) as v(c)`,
      [TENANT],
    );
    await db.query(`vacuum analyze`);
    const [{ events, deliveries }] = (
      await db.query(
        `select (select count(*) from event_outbox)::int as events, (select count(*) from outbox_deliveries)::int as deliveries`,
      )
    ).rows;
    process.stdout.write(
      `${events} events, ${deliveries} deliveries (tenant ${TENANT}: ${EVENTS} events) in ${Math.round((Date.now() - started) / 1000)} s; ` +
        `PostgreSQL ${(await db.query('show server_version')).rows[0].server_version}\n\n`,
    );

    SOME_EVENT = (
      await db.query(`select id from event_outbox where tenant_id = $1 offset 5000 limit 1`, [TENANT])
    ).rows[0].id;
    const statements: [string, { text: string; values: unknown[] }][] = [
      [
        'overview (every refresh)',
        bq.boardOverview(NAMES, {
          tenantId: TENANT,
          cap: 10_000,
          consumers: ['billing', 'welcome-email'],
          minutes: 30,
          orphanAfterMs: 60_000,
          bucketMinutes: 1,
        }),
      ],
      [
        'overview, chart of the last 24 hours',
        bq.boardOverview(NAMES, {
          tenantId: TENANT,
          cap: 10_000,
          consumers: ['billing', 'welcome-email'],
          minutes: 1440,
          orphanAfterMs: 60_000,
          bucketMinutes: 20,
        }),
      ],
      ['search by event id', sq.searchEvents(NAMES, { ...SEARCH, eventId: SOME_EVENT })],
      [
        'search by aggregate (type and id)',
        sq.searchEvents(NAMES, { ...SEARCH, aggregateType: 'contact', aggregateId: 'C-77' }),
      ],
      ['search by aggregate id alone', sq.searchEvents(NAMES, { ...SEARCH, aggregateId: 'C-77' })],
      ['search by correlation id', sq.searchEvents(NAMES, { ...SEARCH, correlationId: 'req-4242' })],
      [
        'search by event name, first page',
        sq.searchEvents(NAMES, { ...SEARCH, eventName: 'orders.paid.v1' }),
      ],
      [
        'search by event name, a page deep in the history',
        sq.searchEvents(NAMES, {
          ...SEARCH,
          eventName: 'orders.paid.v1',
          beforeId: '10000000-0000-4000-8000-000000000000',
        }),
      ],
      ['bulk replay, dry run (billing, dead, one name, a day)', bk.countReplayable(NAMES, BULK)],
      [
        'bulk replay, one chunk of 1,000 (rolled back)',
        bk.replayChunk(NAMES, { ...BULK, afterId: null, chunkSize: 1000 }),
      ],
      ['bulk purge, dry run (billing, one name, a day)', bk.countPurgeable(NAMES, BULK)],
      [
        'bulk purge, one chunk of 1,000 (rolled back)',
        bk.purgeChunk(NAMES, { ...BULK, afterId: null, chunkSize: 1000 }),
      ],
      [
        'failures, first page',
        bq.boardTroubles(NAMES, {
          tenantId: TENANT,
          consumer: null,
          eventName: null,
          beforeId: null,
          limit: 50,
        }),
      ],
      [
        'failures of one consumer and event name',
        bq.boardTroubles(NAMES, {
          tenantId: TENANT,
          consumer: 'billing',
          eventName: 'crm.contact.created.v1',
          beforeId: null,
          limit: 50,
        }),
      ],
      ['blocked aggregates', bq.boardBlockedAggregates(NAMES, TENANT, 100)],
      ['audit log', bq.auditLog(NAMES, TENANT, 50, null)],
    ];
    // for comparison, not checked: the admin service's stats read every row of the tenant
    const baseline = tenantStats(NAMES, {
      tenantId: TENANT,
      orphanAfterMs: 60_000,
      tenantConsumers: [],
      blockedLimit: 100,
    });
    let sequential = 0;
    for (const [label, statement] of statements) {
      // as the board runs them: JIT off (see setBoardContext)
      // the chunks write: their plans are measured in a transaction rolled back
      await db.query('begin');
      const plan = (await explain(db, 'analyze, buffers, format text', statement))
        .map((r: Record<string, string>) => r['QUERY PLAN'])
        .join('\n');
      await db.query('rollback');
      const indexes = [
        ...new Set([...plan.matchAll(/(?:using|Bitmap Index Scan on) (\w+)/g)].map((m) => m[1])),
      ].join(', ');
      const time = /Execution Time: ([\d.]+) ms/.exec(plan)?.[1];
      const scans = plan.match(/Seq Scan on (event_outbox|outbox_deliveries)\b.*/g) ?? [];
      sequential += scans.length;
      process.stdout.write(
        `== ${label}: ${time} ms [${indexes}]${scans.length ? ` — SEQUENTIAL: ${scans.join('; ')}` : ''}\n`,
      );
      if (process.env.PLANS) process.stdout.write(`${plan}\n\n`);
    }
    const stats = (await explain(db, 'analyze, buffers', baseline))
      .map((r: Record<string, string>) => r['QUERY PLAN'])
      .join('\n');
    process.stdout.write(
      `== for comparison, OutboxAdminService.stats: ${/Execution Time: ([\d.]+) ms/.exec(stats)?.[1]} ms, ` +
        `${(stats.match(/Seq Scan on (event_outbox|outbox_deliveries)/g) ?? []).length} sequential scans of the big tables\n`,
    );
    if (sequential > 0) process.exitCode = 1;
  } finally {
    await db.end();
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
