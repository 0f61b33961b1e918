/**
 * `DATABASE_URL=… [ANALYZE=1] [PURGE=1] node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/held-outcomes.ts`
 *
 * The outcome statement of a batch of in-process pairs under a held snapshot (ADR 1206, addendum on the 10-minute
 * hold, "what is left"): a second connection holds `begin isolation level repeatable read; select 1`, then events
 * of one tenant are leased and settled by the relay's own outcome statement (`recordOutcomes`, fenced, two
 * consumers: two delivery rows and two inbox rows per event) in batches of 250; with PURGE=1 each chunk's events
 * are then deleted with their rows as retention does. `EXPLAIN (ANALYZE, BUFFERS)` of the outcome of 20 new
 * events after each chunk (in a rolled-back transaction), the last of three runs.
 */
import type { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import { BENCH_TENANT } from '../harness/bench-database';
import { recordOutcomes } from '../../libs/outbox/src/store/sql/record-outcomes';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import type { DeliveryOutcome } from '../../libs/outbox/src/model/delivery-outcome';
import { connectTwo, heading, openDecisionDatabase, print } from './decision-server';

/** pg's own conversion of a parameter to its text (arrays as array literals), for EXECUTE's literals. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (v: unknown) => string | null };

const CHUNKS = (process.env.SETTLED ?? '30000,60000,120000').split(',').map(Number);
const EVENT = 'bench.held-outcomes.v1';
const CONSUMERS = ['Held.first', 'Held.second'];
/** EXPLAINED: the size of the batch whose outcome is explained (default 20). */
const EXPLAINED = Number(process.env.EXPLAINED ?? 20);
/** BATCH: the size of the batches settled under the hold (default 250; the soak's are of 2–3 events). */
const BATCH = Number(process.env.BATCH ?? 250);
const BATCH_MARKER = 'outbox.batch';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  heading(
    'Outcome statements under a held snapshot (ADR 1206, addendum on the 10-minute hold)',
    serverVersion,
  );
  const n = outboxNames();
  const [client, holder] = await connectTwo(db.url);
  try {
    print(`  without a hold: ${await explainOutcome(client, EXPLAINED)}`);
    await holder.query('begin isolation level repeatable read');
    await holder.query('select 1');
    let settled = 0;
    for (const size of CHUNKS) {
      for (; settled < size; settled += BATCH) await leaseAndSettle(client, BATCH);
      if (process.env.PURGE) {
        await client.query(`delete from consumer_inbox where tenant_id = $1`, [BENCH_TENANT]);
        await client.query(`delete from outbox_deliveries where tenant_id = $1`, [BENCH_TENANT]);
        await client.query(`delete from event_outbox where tenant_id = $1 and status = 'published'`, [
          BENCH_TENANT,
        ]);
      }
      if (process.env.ANALYZE) await client.query('analyze');
      print(
        `  ${String(size).padStart(7)} settled under the hold: ${await explainOutcome(client, EXPLAINED)}`,
      );
    }
  } finally {
    await holder.end();
    await client.end();
    await close();
  }

  /** Inserts `count` events, leases them with one token, and returns them with the token. */
  async function lease(
    c: Client,
    count: number,
  ): Promise<{ token: string; events: { id: string; seq: string }[] }> {
    const token = randomUUID();
    const { rows } = await c.query<{ id: string; seq: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, $3::int) returning id, seq::text`,
      [BENCH_TENANT, EVENT, count],
    );
    await c.query(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select unnest($1::uuid[]), $2, $3, now() + interval '1 minute'`,
      [rows.map((r) => r.id), BENCH_TENANT, token],
    );
    return { token, events: rows };
  }

  function outcome(token: string, events: { id: string; seq: string }[]) {
    const outcomes: DeliveryOutcome[] = events.flatMap((e) =>
      CONSUMERS.map((consumer) => ({
        deliveryId: null,
        pair: { eventId: e.id, consumer, attempt: 1, tenantId: BENCH_TENANT, eventSeq: e.seq },
        status: 'delivered' as const,
        errorCode: null,
        error: null,
        retryInMs: 0,
      })),
    );
    return recordOutcomes(n, outcomes, token, { fenced: true });
  }

  async function leaseAndSettle(c: Client, count: number): Promise<void> {
    const { token, events } = await lease(c, count);
    const statement = outcome(token, events);
    await c.query('begin');
    await c.query(`select set_config($1, $2, true)`, [BATCH_MARKER, token]);
    await c.query(statement.text, [...statement.values]);
    await c.query('commit');
  }

  async function explainOutcome(c: Client, count: number): Promise<string> {
    let last = '';
    for (let run = 0; run < 3; run++) {
      const { token, events } = await lease(c, count);
      const statement = outcome(token, events);
      await c.query('begin');
      try {
        await c.query(`select set_config($1, $2, true)`, [BATCH_MARKER, token]);
        // GENERIC=1: the prepared statement's generic plan, as the relay runs it (values as literals)
        let rows: Record<string, string>[];
        if (process.env.GENERIC) {
          await c.query(`set local plan_cache_mode = force_generic_plan`);
          await c.query(`prepare held_outcome as ${statement.text}`);
          const args = statement.values.map((v) => {
            const text = prepareValue(v);
            return text === null ? 'null' : c.escapeLiteral(text);
          });
          ({ rows } = await c.query<Record<string, string>>(
            `explain (analyze, buffers) execute held_outcome(${args.join(', ')})`,
          ));
        } else
          ({ rows } = await c.query<Record<string, string>>(`explain (analyze, buffers) ${statement.text}`, [
            ...statement.values,
          ]));
        const lines = rows.map((row) => Object.values(row)[0]!);
        if (process.env.PLAN && run === 2) print(lines.join('\n'));
        const buffers = /Buffers: (shared [^\n]*)/.exec(
          lines.find((l) => /Buffers: shared/.test(l)) ?? '',
        )?.[1];
        last = `${buffers ?? 'no buffers'}, ${lines.find((l) => /Execution Time/.test(l))?.trim() ?? ''}`;
      } finally {
        await c.query('rollback');
        if (process.env.GENERIC) await c.query('deallocate all');
      }
    }
    return last;
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
