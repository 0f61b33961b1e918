/**
 * `DATABASE_URL=… HOLD_MS=60000 EXPLAIN=1 node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/held-claims.ts`
 *
 * The trace of ADR 1206: the soak's relay and producer apps and consumers (two in-process consumers, one writing a
 * row), RATE events/s (default 400), a repeatable-read snapshot held from 10 s for HOLD_MS (default 90 s). Every
 * 5 s: the relay's claims (count, mean and max round trip, by kind, fallbacks), its due-tenant scans (count, mean),
 * its claim position for the tenant, and with EXPLAIN set the lean claim's execution time from that position
 * (EXPLAIN ANALYZE in a rolled-back transaction).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { createBenchApp } from '../harness/bench-app';
import { SoakConsumers } from '../harness/bench-consumers';
import { commitContactEvent } from '../harness/latency-runs';
import { SnapshotHolder } from '../harness/snapshot-holder';
import { BENCH_TENANT } from '../harness/bench-database';
import { sleep } from '../harness/stats';
import { openDecisionDatabase, print } from './decision-server';
// internal (not exported by the package): the store's claims and position are what this script watches
import { OUTBOX_STORE_PORT } from '../../libs/outbox/src/store/outbox-store.port';
import type { PgRelayStore } from '../../libs/outbox/src/store/pg-relay-store';
import type { ClaimPositions } from '../../libs/outbox/src/store/claim-positions';
import type {
  ClaimAnswer,
  ClaimRequest,
  TenantConnection,
} from '../../libs/outbox/src/store/outbox-store.port';
import { claimNewEvents } from '../../libs/outbox/src/store/sql/claim-new';
import { outboxNames } from '../../libs/outbox/src/model/table-names';

const RATE = Number(process.env.RATE ?? 400);
const HOLD_AT_MS = 10_000;
const HOLD_MS = Number(process.env.HOLD_MS ?? 90_000);
const TOTAL_MS = HOLD_AT_MS + HOLD_MS + 5_000;

async function main(): Promise<void> {
  const { db, close } = await openDecisionDatabase();
  const relay = await createBenchApp({
    url: db.url,
    consumers: [SoakConsumers],
    relay: { enabled: true },
    probe: false,
  });
  const producer = await createBenchApp({
    url: db.url,
    consumers: [],
    relay: { enabled: false },
    probe: false,
  });
  const store = relay.context.get<PgRelayStore>(OUTBOX_STORE_PORT);
  const claims = {
    n: 0,
    ms: 0,
    max: 0,
    kinds: new Map<string, number>(),
    fallbacks: new Map<string, number>(),
  };
  const scans = { n: 0, ms: 0 };
  const tenantConnection = store.tenantConnection.bind(store);
  store.tenantConnection = (tenantId: string): TenantConnection => {
    const connection = tenantConnection(tenantId);
    const claim = connection.claim.bind(connection);
    connection.claim = async (request: ClaimRequest): Promise<ClaimAnswer> => {
      const kind = `${request.newEvents}${request.due ? '+due' : ''}`;
      const began = performance.now();
      const answer = await claim(request);
      const ms = performance.now() - began;
      claims.n++;
      claims.ms += ms;
      claims.max = Math.max(claims.max, ms);
      claims.kinds.set(kind, (claims.kinds.get(kind) ?? 0) + 1);
      if (answer.fallback)
        claims.fallbacks.set(answer.fallback, (claims.fallbacks.get(answer.fallback) ?? 0) + 1);
      return answer;
    };
    return connection;
  };
  const dueTenants = store.dueTenants.bind(store);
  store.dueTenants = async (request) => {
    const began = performance.now();
    try {
      return await dueTenants(request);
    } finally {
      scans.n++;
      scans.ms += performance.now() - began;
    }
  };
  const positions = (store as unknown as { positions: ClaimPositions | null }).positions;
  const began = performance.now();
  let holder: SnapshotHolder | null = null;
  const report = async (): Promise<void> => {
    const from = positions?.from(BENCH_TENANT, performance.now() - 1) ?? '-1';
    let explained = '';
    if (process.env.EXPLAIN && from !== '0') {
      const statement = claimNewEvents(outboxNames(), {
        tenantId: BENCH_TENANT,
        inProcess: ['bench.notify', 'bench.effect'],
        liveWithinMs: 60_000,
        limit: 50,
        leaseToken: randomUUID(),
        leaseMs: 60_000,
        from,
      });
      await db.sql('begin');
      try {
        const plan = await db.sql<Record<string, string>>(`explain (analyze, buffers) ${statement.text}`, [
          ...statement.values,
        ]);
        explained =
          plan.map((row) => Object.values(row)[0]!).find((line) => /Execution Time/.test(line)) ?? '';
      } finally {
        await db.sql('rollback');
      }
    }
    print(
      `${((performance.now() - began) / 1000).toFixed(0)} s${holder ? ' held' : ''}: claims ${claims.n}, ` +
        `mean ${(claims.ms / Math.max(1, claims.n)).toFixed(2)} ms, max ${claims.max.toFixed(1)} ms, ` +
        `${JSON.stringify(Object.fromEntries(claims.kinds))}, fallbacks ${JSON.stringify(Object.fromEntries(claims.fallbacks))}; ` +
        `due scans ${scans.n}, mean ${(scans.ms / Math.max(1, scans.n)).toFixed(2)} ms; position ${from}; ${explained}`,
    );
    Object.assign(claims, { n: 0, ms: 0, max: 0 });
    claims.kinds.clear();
    claims.fallbacks.clear();
    Object.assign(scans, { n: 0, ms: 0 });
  };
  const ticker = setInterval(
    () => void report().catch((error: unknown) => print(`report failed: ${String(error)}`)),
    5_000,
  );
  const inFlight = new Set<Promise<unknown>>();
  for (let count = 0; performance.now() - began < TOTAL_MS; count++) {
    const at = performance.now() - began;
    if (!holder && at > HOLD_AT_MS && at < HOLD_AT_MS + HOLD_MS) holder = await SnapshotHolder.hold(db.url);
    if (holder && at > HOLD_AT_MS + HOLD_MS) {
      await holder.release();
      holder = null;
    }
    const due = (count * 1000) / RATE;
    if (due > at) await sleep(due - at);
    const p: Promise<unknown> = commitContactEvent(producer)
      .catch((error: unknown) => print(`enqueue failed: ${String(error)}`))
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= RATE) await Promise.race(inFlight);
  }
  clearInterval(ticker);
  await Promise.all(inFlight);
  await holder?.release();
  await producer.close();
  await relay.close();
  await close();
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
