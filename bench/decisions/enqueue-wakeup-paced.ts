/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-wakeup-paced.ts`
 *
 * What the wake-up costs per commit at a FIXED commit rate (issue 35, ADR 1004's addendum of 2026-12-06): one
 * connection, the peers scenario's enqueue work (TypeORM's `transaction()`, a contact through the manager, then the
 * event) started on a fixed schedule of RATES commits/s (default 250 and 1,000), so that the wake-up pacer sees the
 * same interval between commits in every variant and sends the same share of NOTIFYs. Each variant runs COMMITS_S
 * seconds (default 4) per turn, TURNS turns (default 3) in alternating order. Per commit: Node CPU (this process),
 * the server's CPU (/proc: the server must run on this machine), wake-up NOTIFYs (counted by a LISTENing connection
 * in a child process, as a relay of another process would hear them; of them, those sent on a pooled connection of
 * their own, counted at the store), and the commit rate reached.
 *
 * Variants:
 * - `raw`: the hand-written insert through the manager (the peers scenario's raw line);
 * - `library`: as shipped;
 * - `library wakeUps off`: no NOTIFY (what the wake-up costs);
 * - `library NOTIFY named`: (b) the wake-up NOTIFY as a named statement on the pool (scratch: the store's `notify`
 *   replaced on that app's instance);
 * - `raw named` / `raw named + pg_notify`: (a) the hand-written insert as a named statement on the transaction's
 *   client, without and with a `pg_notify` carried in the same statement (`with inserted as (insert …) select
 *   pg_notify(…)`), at every commit: what a wake-up carried by the insert would cost at most.
 * VARIANTS (comma-separated) picks variants; RATES (comma-separated) the rates; NO_LISTENER=1 starts no listener
 * (system calls per commit: `strace -f -c` of one variant at two COMMITS_S, the difference over the commits).
 */
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import type { Pool } from 'pg';
import { readBackendCpu, cpuSpentMs, type RowsQuery } from '../harness/backend-cpu';
import {
  libraryTransactor,
  rawEventInsert,
  typeormTransactor,
  type Transactor,
} from '../harness/enqueue-transactors';
import { BENCH_TENANT } from '../harness/bench-database';
import { now } from '../harness/stats';
import { OutboxStore } from '../../libs/outbox/src/store/outbox.store';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import type { SqlStatement } from '../../libs/outbox/src/store/sql/statement';
import { heading, openDecisionDatabase, print } from './decision-server';
import { createBenchApp } from '../harness/bench-app';
import { contactEvent } from '../harness/enqueue-transactors';
import { insertContact } from '../raw/raw.queries';

const RATES = (process.env.RATES ?? '250,1000').split(',').map(Number);
const SECONDS = Number(process.env.COMMITS_S ?? 4);
const TURNS = Number(process.env.TURNS ?? 3);
const LIBRARY = { side: 'library', business: true, withEvent: true } as const;
const CHANNEL = outboxNames().wakeupChannel;

/** Wake-up NOTIFYs sent on a pooled connection of their own, by every app of this process. */
interface PooledCount {
  count: number;
}

/** Counts the wake-up NOTIFYs sent on a pooled connection of their own, at the store (scratch, for this script). */
function countPooledNotifies(): PooledCount {
  const pooled = { count: 0 };
  const { prototype } = OutboxStore;
  const notify = Object.getOwnPropertyDescriptor(prototype, 'notify')!.value as (
    this: OutboxStore,
    statement: SqlStatement,
  ) => Promise<void>;
  prototype.notify = function (this: OutboxStore, statement: SqlStatement) {
    pooled.count++;
    return notify.call(this, statement);
  };
  return pooled;
}

/** The library app with its store's wake-up NOTIFY sent as a named statement on the pool (scratch, variant b). */
async function namedNotifyTransactor(url: string, name: string, pooled: PooledCount): Promise<Transactor> {
  const app = await createBenchApp({ url, consumers: [], poolSize: 10, applicationName: name, probe: false });
  const store = app.context.get(OutboxStore);
  const pool = (app.dataSource.driver as unknown as { master: Pool }).master;
  store.notify = async (statement: SqlStatement) => {
    pooled.count++;
    await pool.query({ name: 'outbox_wakeup', text: statement.text, values: statement.values as unknown[] });
  };
  return {
    statements: () => Number.NaN,
    run: () =>
      app.dataSource.transaction(async (manager) => {
        const { contact, event } = contactEvent();
        const insert = insertContact(contact.id, BENCH_TENANT, contact.name, contact.email);
        await manager.query(insert.text, insert.values);
        await app.outbox.enqueue(manager, event);
      }),
    close: () => app.close(),
  };
}

/** The hand-written insert, named on the transaction's client; with `carry`, a `pg_notify` in the same statement. */
function rawNamed(url: string, name: string, carry: boolean): Promise<Transactor> {
  return typeormTransactor(url, 1, name, async (_manager, client) => {
    const insert = rawEventInsert();
    if (!carry) {
      await client.query({ name: 'bench_raw_event', text: insert.text, values: insert.values });
      return;
    }
    await client.query({
      name: 'bench_raw_event_carrying',
      text: `with inserted as (${insert.text} returning 1) select pg_notify($7, $8) from inserted`,
      values: [...insert.values, CHANNEL, BENCH_TENANT],
    });
  });
}

const OPENERS: Record<string, (url: string, name: string, pooled: PooledCount) => Promise<Transactor>> = {
  raw: (url, name) =>
    typeormTransactor(url, 1, name, async (manager) => {
      const insert = rawEventInsert();
      await manager.query(insert.text, insert.values);
    }),
  library: (url, name) => libraryTransactor(url, 1, LIBRARY, name, false),
  'library wakeUps off': (url, name) =>
    libraryTransactor(url, 1, { ...LIBRARY, relay: { wakeUps: 'off' } }, name, false),
  'library NOTIFY named': (url, name, pooled) => namedNotifyTransactor(url, name, pooled),
  'raw named': (url, name) => rawNamed(url, name, false),
  'raw named + pg_notify': (url, name) => rawNamed(url, name, true),
};

/** A relay of another process, as far as the wake-up goes: a child that LISTENs and counts what it hears. */
function listener(url: string): Promise<{ heard: () => Promise<number>; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const { Client } = require('pg');
         const c = new Client({ connectionString: ${JSON.stringify(url)} });
         let heard = 0;
         c.on('notification', () => heard++);
         c.connect().then(() => c.query('listen ${CHANNEL}')).then(() => process.send('ready'));
         process.on('message', () => process.send(heard));`,
    ],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  return new Promise((resolve) =>
    child.once('message', () =>
      resolve({
        heard: () =>
          new Promise((answer) => {
            child.once('message', (count) => answer(count as number));
            child.send('count');
          }),
        stop: () => child.kill(),
      }),
    ),
  );
}

interface Figures {
  rate: number;
  node: number;
  server: number;
  notifies: number;
  pooled: number;
}

/** Commits on a fixed schedule of `rate` per second for SECONDS; a commit late on its time starts at once. */
async function paced(
  transactor: Transactor,
  rate: number,
  applicationName: string,
  query: RowsQuery,
  heard: () => Promise<number>,
  pooled: PooledCount,
): Promise<Figures> {
  const commits = rate * SECONDS;
  const interval = 1000 / rate;
  await new Promise((resolve) => setTimeout(resolve, 50)); // the last variant's wake-ups heard
  const heardBefore = await heard();
  const pooledBefore = pooled.count;
  const serverBefore = await readBackendCpu(query, [applicationName]);
  const cpuBefore = process.cpuUsage();
  const began = now();
  for (let i = 0; i < commits; i++) {
    const wait = began + i * interval - now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    await transactor.run(0);
  }
  const ms = now() - began;
  const pooledNotifies = pooled.count - pooledBefore;
  const cpu = process.cpuUsage(cpuBefore);
  const serverMs = cpuSpentMs(serverBefore, await readBackendCpu(query, [applicationName]));
  await new Promise((resolve) => setTimeout(resolve, 50));
  return {
    rate: (commits / ms) * 1000,
    node: (cpu.user + cpu.system) / commits,
    server: serverMs === null ? Number.NaN : (serverMs * 1000) / commits,
    notifies: ((await heard()) - heardBefore) / commits,
    pooled: pooledNotifies / commits,
  };
}

function range(values: readonly number[], digits = 0): string {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (v: number): string => v.toFixed(digits);
  return sorted.length > 1 ? `${f(sorted[0]!)}–${f(sorted[sorted.length - 1]!)}` : f(sorted[0]!);
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const query = db.sql.bind(db) as RowsQuery;
  const pooled = countPooledNotifies();
  // NO_LISTENER=1: no child (for `strace -f -c`, so that only this process's system calls are counted)
  const relay = process.env.NO_LISTENER
    ? { heard: () => Promise.resolve(Number.NaN), stop: () => undefined }
    : await listener(db.url);
  try {
    heading(`Wake-up cost per commit at a fixed rate, 1 connection, ${SECONDS} s per turn`, serverVersion);
    const variants = process.env.VARIANTS?.split(',') ?? Object.keys(OPENERS);
    const names = new Map(variants.map((v, i) => [v, `decision-wakeup-paced-${i}`]));
    const transactors = new Map<string, Transactor>();
    for (const variant of variants)
      transactors.set(variant, await OPENERS[variant]!(db.url, names.get(variant)!, pooled));
    for (const rate of RATES) {
      await db.truncate();
      const figures = new Map(variants.map((v) => [v, [] as Figures[]]));
      for (let turn = 0; turn < TURNS; turn++) {
        const order = turn % 2 === 0 ? variants : [...variants].reverse();
        for (const variant of order)
          figures
            .get(variant)!
            .push(
              await paced(transactors.get(variant)!, rate, names.get(variant)!, query, relay.heard, pooled),
            );
      }
      print(`  ${rate} commits/s scheduled (ranges over ${TURNS} turns)`);
      for (const [variant, runs] of figures)
        print(
          `    ${variant.padEnd(24)} Node ${range(runs.map((r) => r.node))} µs · server ${range(runs.map((r) => r.server))} µs` +
            ` · NOTIFYs heard ${range(
              runs.map((r) => r.notifies),
              3,
            )}, of them pooled ${range(
              runs.map((r) => r.pooled),
              3,
            )}` +
            ` · ${range(runs.map((r) => r.rate))} commits/s`,
        );
    }
    for (const transactor of transactors.values()) await transactor.close();
  } finally {
    relay.stop();
    await close();
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
