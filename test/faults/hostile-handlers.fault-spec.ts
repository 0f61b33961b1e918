import { join } from 'node:path';
import { buildApp, type TestApp } from '../support/build-app';
import { startChildRelay, type ChildRelay } from '../support/child-relay';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';
import { HOSTILE_SCENARIO_SQL } from './support/hostile-consumers';
import { FAULT_TENANTS } from './support/load';
import { pace } from './support/fault-fleet';
import { faultRandom } from './support/fault-random';

const EVENTS = 3000;
/** Events enqueued per producer transaction, and the pause between two (about 100 events/s in all). */
const PER_COMMIT = 2;
const COMMIT_EVERY_MS = 20;
const TIMEOUT_MS = 300;
/** How long the hostile consumer's query sleeps when it sleeps past its timeout (`pg_sleep(10)`, see `hostileAct`). */
const SLEEP_MS = 10_000;
const HEALTHY = ['hx-audit', 'hx-writer'];
const SCRIPT = join(__dirname, 'support', 'hostile-relay-child.ts');

describe('fault: hostile handlers beside healthy consumers', () => {
  const random = faultRandom(__filename);
  let db: TestDatabase;
  let producer: TestApp;
  const relays: ChildRelay[] = [];
  beforeAll(async () => {
    db = await createTestDatabase(HOSTILE_SCENARIO_SQL);
    producer = await buildApp({ url: db.url, outbox: { relay: { enabled: false, wakeUps: 'notify' } } });
  });
  afterAll(async () => {
    await Promise.all(relays.map((r) => r.kill('SIGKILL')));
    await producer?.close();
    await db?.drop();
  });

  it('loses, dead-letters or duplicates no healthy delivery, and holds no tenant behind a hostile query', async () => {
    const env = { DATABASE_URL: db.url, TIMEOUT_MS: String(TIMEOUT_MS), ...random.env() };
    relays.push(...(await Promise.all([1, 2].map(() => startChildRelay(env, { script: SCRIPT })))));
    const began = Date.now();
    for (let n = 0; n < EVENTS; n += PER_COMMIT) {
      const tenantId = FAULT_TENANTS[(n / PER_COMMIT) % FAULT_TENANTS.length]!;
      await producer.dataSource.transaction((m) =>
        producer.outbox.enqueueMany(
          m,
          Array.from({ length: PER_COMMIT }, (_, i) => ({
            tenantId,
            eventName: 'fault.hostile.v1',
            payload: { n: n + i },
          })),
        ),
      );
      await pace(COMMIT_EVERY_MS);
    }
    // settled: every event published or failed (a hostile delivery dead), no delivery waiting or running
    await waitFor(
      async () =>
        (
          await db.sql<{ n: number }>(
            `select ((select count(*) from event_outbox where status in ('pending', 'processing'))
                   + (select count(*) from outbox_deliveries where status in ('pending', 'processing', 'failed')))::int n`,
          )
        )[0]!.n === 0,
      { timeoutMs: 180_000, intervalMs: 200, message: 'every delivery settled' },
    );
    const recoveryMs = Date.now() - began;

    const [history] = await db.sql<{
      events: number;
      lost: number;
      duplicated: number;
      phantom: number;
      healthy_not_delivered: number;
    }>(
      `with expected as (
         select e.id, c.consumer from event_outbox e cross join unnest($1::text[]) as c(consumer)
       ), got as (
         select event_id, consumer, count(*) as n from hostile_effects group by event_id, consumer
       )
       select (select count(*)::int from event_outbox) as events,
              (select count(*)::int from expected x left join got g on g.event_id = x.id and g.consumer = x.consumer where g.n is null) as lost,
              (select coalesce(sum(n - 1), 0)::int from got where n > 1) as duplicated,
              (select count(*)::int from got g where not exists (select 1 from event_outbox e where e.id = g.event_id)) as phantom,
              (select count(*)::int from expected x left join outbox_deliveries d on d.event_id = x.id and d.consumer_name = x.consumer
                where d.status is distinct from 'delivered') as healthy_not_delivered`,
      [HEALTHY],
    );
    // how long each hostile sleep held its connection (see `sleepReported`): stopped at its timeout, or not
    const slept = relays.flatMap((r) =>
      r.lines.filter((l) => l.startsWith('SLEPT ')).map((l) => Number(l.slice('SLEPT '.length))),
    );
    const delays = await db.sql<{ tenant_id: string; max_ms: number; p99_ms: number }>(
      `select e.tenant_id, max(extract(epoch from x.at - e.created_at) * 1000)::int as max_ms,
              (percentile_cont(0.99) within group (order by extract(epoch from x.at - e.created_at) * 1000))::int as p99_ms
         from hostile_effects x join event_outbox e on e.id = x.event_id
        where x.consumer = any($1::text[]) group by e.tenant_id order by e.tenant_id`,
      [HEALTHY],
    );
    const acts = await db.sql<{ act: string; n: number }>(
      `select case when last_error like '%unprintable%' then 'unprintable'
                   when last_error like '%deferred constraint%' then 'deferred violation'
                   when last_error like '%tried "commit"%' or last_error like '%tried "rollback"%' then 'commit/rollback'
                   when last_error like '%changed app.current_tenant_id%' then 'tenant change'
                   when error_code = 'timeout' then 'sleep past timeout'
                   else coalesce(error_code, '') || ': ' || left(last_error, 80) end as act,
              count(*)::int as n
         from outbox_deliveries where consumer_name = 'hx-hostile' and last_error is not null and status <> 'delivered'
        group by 1 order by 1`,
    );
    const [settings] = await db.sql<{ n: number }>(
      // events whose hostile call changed the session (delivered, no effect of its own): their neighbours landed
      `select count(*)::int as n from outbox_deliveries d
        where d.consumer_name = 'hx-hostile' and d.status = 'delivered'
          and not exists (select 1 from hostile_effects x where x.event_id = d.event_id and x.consumer = 'hx-hostile')`,
    );
    console.log(
      `[faults] hostile handlers: events=${history!.events} lost=${history!.lost} duplicated=${history!.duplicated} ` +
        `phantom=${history!.phantom} healthy-not-delivered=${history!.healthy_not_delivered} ` +
        `acts=${acts.map((a) => `${a.act}:${a.n}`).join(',')} session-changes=${settings!.n} ` +
        `delay-ms(max/p99 per tenant)=${delays.map((d) => `${d.max_ms}/${d.p99_ms}`).join(',')} ` +
        `slept-ms(max of ${slept.length})=${Math.max(...slept)} recovery=${recoveryMs}ms`,
    );
    expect(history).toEqual({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, healthy_not_delivered: 0 });
    // every kind of misbehaviour happened, and was failed as what it was
    const known = [
      'commit/rollback',
      'deferred violation',
      'sleep past timeout',
      'tenant change',
      'unprintable',
    ];
    // A batch being narrowed reruns its hostile handlers (sleeps included) and can outlive its lease on a loaded
    // machine: the hostile consumer's unfinished attempts are then dead-lettered as stale (4 of 3,000 once, in a
    // CI run beside other test runs). That is the hostile consumer's own delivery; every healthy one still lands.
    const STALE = /^staleLeaseRecovered: /;
    expect(acts.filter((a) => !STALE.test(a.act)).map((a) => a.act)).toEqual(known.sort());
    expect(settings!.n).toBeGreaterThan(0);
    expect(delays).toHaveLength(FAULT_TENANTS.length);
    // No tenant is held behind a hostile query: each sleep was stopped at its handler's timeout, far short of its
    // end, its bound taken off or not. Counted directly, on the relays' connections, rather than read from the
    // healthy effects' delays: those grow with the backlog the hostile load leaves on a loaded machine (reruns
    // of timed-out handlers while batches are narrowed: p99 from 5 to 19 s at a load average of 10), with no
    // query held at all.
    expect(slept.length).toBeGreaterThan(0);
    expect(slept.filter((ms) => ms >= SLEEP_MS / 2)).toEqual([]);
  });
});
