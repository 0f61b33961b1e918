/**
 * `DATABASE_URL=… node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/due-tenant-scan-tenants.ts`
 *
 * What the due-tenant scan from positions costs with many tenants and no hold (ADR 1206, addendum): 100, 1,000 and
 * 5,000 tenants with one pending event each, every one positioned (the worst case: a probe per fence and per gap),
 * against the two-argument form. `EXPLAIN (ANALYZE, BUFFERS)`, eight runs each, the last three printed.
 */
import { Client } from 'pg';
import { dueTenants } from '../../libs/outbox/src/store/sql/due-tenants';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { openDecisionDatabase, print } from './decision-server';

async function main(): Promise<void> {
  const { db, close } = await openDecisionDatabase();
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    const server = (await client.query<{ s: string }>(`select pg_postmaster_start_time()::text as s`))
      .rows[0]!.s;
    for (const n of [100, 1000, 5000]) {
      await client.query(`truncate event_outbox, outbox_event_leases`);
      await client.query(
        `insert into event_outbox (id, tenant_id, event_name, payload)
         select gen_random_uuid(), gen_random_uuid(), 'x', '{}'::jsonb from generate_series(1, $1::int)`,
        [n],
      );
      await client.query('analyze event_outbox');
      const rows = (
        await client.query<{ t: string; s: string }>(
          `select tenant_id::text as t, seq::text as s from event_outbox`,
        )
      ).rows;
      const now = (await client.query<{ now: string }>(`select now()::text as now`)).rows[0]!.now;
      const forms = {
        old: null,
        all_positioned: {
          tenants: rows.map((r) => r.t),
          seqs: rows.map((r) => r.s),
          server,
          leasesSince: now,
        },
      };
      for (const [name, positions] of Object.entries(forms)) {
        const st = dueTenants(outboxNames(), 100, null, positions);
        const times: string[] = [];
        for (let i = 0; i < 8; i++) {
          const plan = await client.query<Record<string, string>>(`explain (analyze, buffers) ${st.text}`, [
            ...st.values,
          ]);
          const lines = plan.rows.map((r) => Object.values(r)[0]!);
          times.push(
            `${/Execution Time: ([\d.]+)/.exec(lines.join('\n'))?.[1]} ms ${/shared hit=(\d+)/.exec(lines.join('\n'))?.[1]}b`,
          );
        }
        print(`  ${n} tenants, ${name}: ${times.slice(-3).join(' | ')}`);
      }
    }
  } finally {
    await client.end();
    await close();
  }
}
void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
