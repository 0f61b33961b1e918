/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/due-scan-backlog.ts`
 *
 * The due-tenant scan behind a backlog (ADR 1106, addendum "The due-tenant scan behind a backlog"): one tenant
 * has BACKLOG events (default 50,000), of which SETTLE (default 20,000) are settled, vacuumed and analyzed, and its
 * claim position at its first pending event; another tenant has one new event. `EXPLAIN (ANALYZE, BUFFERS)` of
 * `outbox_due_tenants` from the positions, the last of four runs (the first also plans the function's
 * statements). PLANS=1 prints the plans of the statements inside the function (auto_explain).
 */
import { Client } from 'pg';
import { dueTenants } from '../../libs/outbox/src/store/sql/due-tenants';
import { SERVER_START } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { heading, openDecisionDatabase, print } from './decision-server';

const BIG = '5eb0a1c4-0000-4000-8000-0000000000b1';
const SMALL = '5eb0a1c4-0000-4000-8000-0000000000c1';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  heading('Due-tenant scan behind a backlog (ADR 1106, addendum)', serverVersion);
  const client = new Client({ connectionString: db.url });
  await client.connect();
  client.on('notice', (notice) => print(String(notice.message)));
  try {
    const [{ server } = { server: '' }] = (
      await client.query<{ server: string }>(`select ${SERVER_START} as server`)
    ).rows;
    await db.loadPendingEvents(Number(process.env.BACKLOG ?? 50_000), BIG);
    await client.query(
      `update event_outbox set status = 'published', published_at = now()
        where id in (select id from event_outbox where tenant_id = $1 order by seq limit $2)`,
      [BIG, Number(process.env.SETTLE ?? 20_000)],
    );
    await db.loadPendingEvents(1, SMALL);
    await db.vacuumAnalyze();
    const [{ first } = { first: '0' }] = (
      await client.query<{ first: string }>(
        `select min(seq)::text as first from event_outbox where tenant_id = $1 and status = 'pending'`,
        [BIG],
      )
    ).rows;
    const [{ now } = { now: '' }] = (await client.query<{ now: string }>(`select now()::text as now`)).rows;
    if (process.env.PLANS) {
      for (const setting of [
        `load 'auto_explain'`,
        'set auto_explain.log_min_duration = 0',
        'set auto_explain.log_nested_statements = on',
        'set auto_explain.log_analyze = on',
        'set auto_explain.log_buffers = on',
        `set auto_explain.log_level = 'notice'`,
      ])
        await client.query(setting);
    }
    const statement = dueTenants(outboxNames(), 100, null, {
      tenants: [BIG, SMALL],
      seqs: [first, '0'],
      server,
      leasesSince: now,
    });
    for (let run = 1; run <= 4; run++) {
      const { rows } = await client.query<Record<string, string>>(
        `explain (analyze, buffers) ${statement.text}`,
        [...statement.values],
      );
      const lines = rows.map((row) => Object.values(row)[0]!);
      const buffers = lines.find((l) => /Buffers: shared/.test(l))?.trim() ?? 'no buffers';
      const time = lines.find((l) => /Execution Time/.test(l))?.trim() ?? '';
      print(`  run ${run}: ${buffers}, ${time}`);
    }
  } finally {
    await client.end();
    await close();
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
