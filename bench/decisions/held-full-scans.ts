/**
 * `DATABASE_URL=… node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/held-full-scans.ts`
 *
 * What the relay's safety nets cost under a held snapshot (ADR 1206, addendum on the 10-minute hold): a second
 * connection holds `begin isolation level repeatable read; select 1`, then SETTLED events of one tenant (default
 * 60k, 120k, 240k, cumulative: 240k is 10 minutes at 400 events/s) are settled as the lean claim and its outcome
 * do (a lease inserted and deleted, the event `published`), and 20 new events are inserted. `EXPLAIN (ANALYZE,
 * BUFFERS)` of the due-tenant scan, the lean claim and the fan-out in each of the forms the relay sends, the last of
 * three runs; the fan-out's `released` (run at the executor's finish, outside the top node's buffers) added apart.
 * `TENANT=nil`: the events are the nil tenant's, the one the warm-up of a connection's claims claims for.
 */
import type { Client } from 'pg';
import { BENCH_TENANT } from '../harness/bench-database';
import { dueTenants, type DuePositions } from '../../libs/outbox/src/store/sql/due-tenants';
import { claimNewEvents, newEventsWarmUp } from '../../libs/outbox/src/store/sql/claim-new';
import { fanOutPendingEvents } from '../../libs/outbox/src/store/sql/fan-out';
import { SERVER_START } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { connectTwo, explainRolledBack, heading, openDecisionDatabase, print } from './decision-server';

const SIZES = (process.env.SETTLED ?? '60000,120000,240000').split(',').map(Number);
const EVENT = 'bench.held-full-scans.v1';
/** NEW: how many new events wait for the claims (default 20; a claim takes up to 250). */
const NEW = Number(process.env.NEW ?? 20);
/** TENANT=nil: the events are the nil tenant's (a single-tenant app's, the tenant the warm-up claims for). */
const TENANT = process.env.TENANT === 'nil' ? '00000000-0000-0000-0000-000000000000' : BENCH_TENANT;

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  heading('Safety nets under a held snapshot (ADR 1206, addendum on the 10-minute hold)', serverVersion);
  const n = outboxNames();
  const [client, holder] = await connectTwo(db.url);
  try {
    const [{ server } = { server: '' }] = (
      await client.query<{ server: string }>(`select ${SERVER_START} as server`)
    ).rows;
    await client
      .query(
        `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('Held.consumer', '{bench.*}', now())
       on conflict do nothing`,
      )
      .catch((e: Error) => print(`  (no consumer registered: ${e.message})`));
    await holder.query('begin isolation level repeatable read');
    await holder.query('select 1');
    let settled = 0;
    for (const size of SIZES) {
      // a minute's worth before the last: where a position of a minute ago would stand
      await settle(client, size - settled - 24_000);
      const minuteAgo = await nextSeq(client);
      await settle(client, 24_000);
      settled = size;
      const position = await nextSeq(client);
      await client.query(
        `insert into event_outbox (id, tenant_id, event_name, payload)
         select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, $3::int)`,
        [TENANT, EVENT, NEW],
      );
      const [{ now: lastScan } = { now: '' }] = (
        await client.query<{ now: string }>(`select now()::text as now`)
      ).rows;
      // ANALYZE=1: as autovacuum's analyze would, with the hold's dead rows in the tables (the plans may change)
      if (process.env.ANALYZE) await client.query('analyze event_outbox, outbox_event_leases');
      const positioned = (seq: string, leasesSince: string | null): DuePositions => ({
        tenants: [TENANT],
        seqs: [seq],
        server,
        leasesSince,
      });
      const none: DuePositions = { tenants: [], seqs: [], server, leasesSince: null };
      const claim = (from: string) =>
        claimNewEvents(n, {
          tenantId: TENANT,
          inProcess: ['Held.consumer'],
          liveWithinMs: 600_000,
          limit: 250,
          leaseToken: '00000000-0000-0000-0000-000000000001',
          leaseMs: 60_000,
          from,
        });
      // its recovery of fanned-out events (`stale`): every expired lease, or those expired since the tenant's last look
      const fanOut = (from: string, leasesSince: string | null) =>
        fanOutPendingEvents(n, {
          tenantId: TENANT,
          hosted: ['Held.consumer'],
          inProcess: [],
          tenantConsumers: [],
          liveWithinMs: 600_000,
          limit: 250,
          leaseToken: '00000000-0000-0000-0000-000000000001',
          leaseMs: 60_000,
          from,
          leasesSince,
        });
      const forms: [string, { text: string; values: readonly unknown[] }][] = [
        [
          'due scan, positioned, leases since the last scan',
          dueTenants(n, 100, null, positioned(position, lastScan)),
        ],
        ['due scan, positioned, every expired lease', dueTenants(n, 100, null, positioned(position, null))],
        ['due scan, positioned a minute ago', dueTenants(n, 100, null, positioned(minuteAgo, lastScan))],
        ['due scan, unpositioned (full scan due)', dueTenants(n, 100, null, none)],
        ['lean claim from the position', claim(position)],
        ['lean claim from a minute ago', claim(minuteAgo)],
        ['lean claim from 0 (full scan)', claim('0')],
        ['fan-out from the position, every expired lease', fanOut(position, null)],
        ['fan-out from the position, leases since the last look', fanOut(position, lastScan)],
        // a connection's warm-up of its named statements (see refreshPrepared): the claims for the nil tenant
        ...newEventsWarmUp(n, { leanClaim: true }).map(
          (s, i): [string, { text: string; values: readonly unknown[] }] => [
            `warm-up, ${i === 0 ? 'fan-out' : 'lean claim'} for no tenant`,
            s,
          ],
        ),
      ];
      // PLAN=1: the plan of the positioned scan's statement inside the function (auto_explain, as notices)
      if (process.env.PLAN) {
        const notices: string[] = [];
        const onNotice = (m: { message?: string }): void => void notices.push(m.message ?? '');
        client.on('notice', onNotice);
        await client.query(`load 'auto_explain'`);
        if (process.env.PLAN_MODE) await client.query(`set plan_cache_mode = ${process.env.PLAN_MODE}`);
        await client.query(
          `set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on; set auto_explain.log_buffers = on;
           set auto_explain.log_nested_statements = on; set client_min_messages = log`,
        );
        const statement = forms[0]![1];
        await client.query(statement.text, [...statement.values]);
        await client.query(`set client_min_messages = notice; set auto_explain.log_min_duration = -1`);
        client.off('notice', onNotice);
        print(notices.join('\n'));
      }
      // LOOP=1: the positioned scan's round trip, ten times, with custom plans (as the function makes them) and generic
      if (process.env.LOOP) {
        const statement = forms[0]![1];
        for (const mode of ['auto', 'force_custom_plan', 'force_generic_plan']) {
          await client.query(`set plan_cache_mode = ${mode}`);
          const times: string[] = [];
          for (let i = 0; i < 10; i++) {
            const t0 = performance.now();
            await client.query(statement.text, [...statement.values]);
            times.push((performance.now() - t0).toFixed(1));
          }
          print(
            `  ${String(size).padStart(7)} settled, positioned scan round trips, plan_cache_mode ${mode}: ${times.join(' ')} ms`,
          );
        }
        await client.query(`reset plan_cache_mode`);
      }
      for (const [form, statement] of forms) {
        let last = '';
        for (let run = 0; run < 3; run++) last = await explainRolledBack(client, statement);
        // the fan-out's `released` (a data-modifying CTE the answer does not read) runs when the executor finishes:
        // its buffers are not in the top node's (they are in pg_stat_statements' count)
        const released = /CTE released\n[^\n]*\n\s*Buffers: shared hit=(\d+)(?: read=(\d+))?/.exec(
          await explainRolledBack(client, statement, true),
        );
        if (released) last += `; + released: ${Number(released[1]) + Number(released[2] ?? 0)} buffers`;
        // FORM=text: the whole plan of the forms whose name holds it (the last run)
        if (process.env.FORM && form.includes(process.env.FORM))
          print(await explainRolledBack(client, statement, true));
        print(`  ${String(size).padStart(7)} settled, ${form.padEnd(50)} ${last}`);
      }
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

async function nextSeq(client: Client): Promise<string> {
  const { rows } = await client.query<{ position: string }>(
    `select (coalesce(max(seq), 0) + 1)::text as position from event_outbox where tenant_id = $1`,
    [TENANT],
  );
  return rows[0]!.position;
}

/** Settles `n` new events of the bench tenant as the lean claim and its outcome do. */
async function settle(client: Client, count: number): Promise<void> {
  await client.query(
    `insert into event_outbox (id, tenant_id, event_name, payload)
     select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, $3::int)`,
    [TENANT, EVENT, count],
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

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
