/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/doctor-cost.ts`
 *
 * What the doctor's checks cost (ADR 1010): `examineOutbox` on one connection, RUNS (default 20) times, on an empty
 * outbox and then with EVENTS (default 200,000) published events, one delivered delivery each and a pending
 * delivery for every 20th (analyzed): the median and the slowest run, in ms. It decides whether the health
 * indicator may run the checks on every probe (it does only when asked: `isHealthy(key, { doctor })`).
 */
import { examineOutbox } from '../../libs/outbox/src/maintenance/outbox-doctor';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { openDoctorConnection } from '../../libs/outbox/src/store/doctor-connection';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const RUNS = Number(process.env.RUNS ?? 20);
const EVENTS = Number(process.env.EVENTS ?? 200_000);

async function timeChecks(url: string, label: string): Promise<void> {
  const connection = await openDoctorConnection(url);
  try {
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      await examineOutbox((statement) => connection.query(statement), { names: outboxNames() });
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    print(
      `  ${label}: median ${times[Math.floor(RUNS / 2)]!.toFixed(1)} ms, slowest ${times[RUNS - 1]!.toFixed(1)} ms (${RUNS} runs)`,
    );
  } finally {
    await connection.close();
  }
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading('doctor-cost: the doctor’s checks, one connection', serverVersion);
    await timeChecks(db.url, 'empty outbox');
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at)
       select gen_random_uuid(), gen_random_uuid(), 'bench.doctor.v1', '{}', 'published', now()
         from generate_series(1, $1::int)`,
      [EVENTS],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, 'bench.delivered', seq, 'delivered' from event_outbox
       union all
       select id, tenant_id, 'bench.pending', seq, 'pending' from event_outbox where seq % 20 = 0`,
    );
    await db.sql('analyze');
    await timeChecks(
      db.url,
      `${EVENTS.toLocaleString('en-US')} events, ${(EVENTS * 1.05).toLocaleString('en-US')} deliveries (5 % pending)`,
    );
  } finally {
    await close();
  }
}

exitWhenDone(main());
