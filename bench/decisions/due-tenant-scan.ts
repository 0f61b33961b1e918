/**
 * `DATABASE_URL=… node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/due-tenant-scan.ts`
 *
 * The due-tenant scan under a held snapshot (ADR 1206, addendum on the due-tenant scan): a second connection holds
 * `begin isolation level repeatable read; select 1`, then SETTLED events of one tenant (default 25k, 50k, 100k,
 * cumulative) are settled as the lean claim and its outcome do (a lease inserted and deleted, the event
 * `published`), and 20 new events are inserted. `EXPLAIN (ANALYZE, BUFFERS)` of `outbox_due_tenants` in its
 * two-argument form (what a relay without claim positions calls, and the form before this addendum) and in its
 * six-argument form from the tenant's position past the settled events; each run three times, the figures of the
 * last (the first also plans the function's statements). Buffers are the deterministic figure.
 */
import { Client } from 'pg';
import { BENCH_TENANT } from '../harness/bench-database';
import { dueTenants } from '../../libs/outbox/src/store/sql/due-tenants';
import { SERVER_START } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { heading, openDecisionDatabase, print } from './decision-server';

const SIZES = (process.env.SETTLED ?? '25000,50000,100000').split(',').map(Number);
const EVENT = 'bench.due-scan.v1';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  heading('Due-tenant scan under a held snapshot (ADR 1206, addendum)', serverVersion);
  const client = new Client({ connectionString: db.url });
  await client.connect();
  const holder = new Client({ connectionString: db.url });
  await holder.connect();
  try {
    const [{ server } = { server: '' }] = (
      await client.query<{ server: string }>(`select ${SERVER_START} as server`)
    ).rows;
    await holder.query('begin isolation level repeatable read');
    await holder.query('select 1');
    let settled = 0;
    for (const size of SIZES) {
      await settle(client, size - settled);
      settled = size;
      const [{ position } = { position: '0' }] = (
        await client.query<{ position: string }>(
          `select (max(seq) + 1)::text as position from event_outbox where tenant_id = $1`,
          [BENCH_TENANT],
        )
      ).rows;
      await client.query(
        `insert into event_outbox (id, tenant_id, event_name, payload)
         select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, 20)`,
        [BENCH_TENANT, EVENT],
      );
      // the relay's last complete scan, a moment ago
      const [{ now: lastScan } = { now: '' }] = (
        await client.query<{ now: string }>(`select now()::text as now`)
      ).rows;
      const forms = {
        'two arguments (no positions)': null,
        'from the position': { tenants: [BENCH_TENANT], seqs: [position], server, leasesSince: lastScan },
      };
      for (const [form, positions] of Object.entries(forms)) {
        let figures = '';
        const runs: string[] = [];
        for (let run = 0; run < 6; run++)
          runs.push(await explain(client, dueTenants(outboxNames(), 100, null, positions)));
        figures = process.env.ALL_RUNS ? runs.join(' | ') : runs[runs.length - 1]!;
        print(`  ${String(size).padStart(7)} settled under the hold, ${form.padEnd(30)} ${figures}`);
      }
      // the new events are settled too before the next size
      await client.query(
        `update event_outbox set status = 'published', published_at = now() where status = 'pending'`,
      );
    }
  } finally {
    await holder.end();
    await client.end();
    await close();
  }
}

/** Settles `n` new events of the bench tenant as the lean claim and its outcome do. */
async function settle(client: Client, n: number): Promise<void> {
  await client.query(
    `insert into event_outbox (id, tenant_id, event_name, payload)
     select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, $3::int)`,
    [BENCH_TENANT, EVENT, n],
  );
  await client.query(
    `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
     select id, tenant_id, gen_random_uuid(), now() - interval '1 minute' from event_outbox where status = 'pending'`,
  );
  await client.query(`delete from outbox_event_leases`);
  await client.query(
    `update event_outbox set status = 'published', published_at = now() where status = 'pending'`,
  );
}

/** The scan's shared buffers and execution time, from its plan. */
async function explain(
  client: Client,
  statement: { text: string; values: readonly unknown[] },
): Promise<string> {
  const { rows } = await client.query<Record<string, string>>(
    `explain (analyze, buffers) ${statement.text}`,
    [...statement.values],
  );
  const lines = rows.map((row) => Object.values(row)[0]!);
  const buffers = /Buffers: (shared [^\n]*)/.exec(lines.find((l) => /Buffers: shared/.test(l)) ?? '')?.[1];
  const time = lines.find((l) => /Execution Time/.test(l))?.trim();
  return `${buffers ?? 'no buffers'}, ${time ?? ''}`;
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
