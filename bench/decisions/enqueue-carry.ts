/**
 * `DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --expose-gc --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-carry.ts`
 *
 * What a carried wake-up costs the enqueuing process per commit (issue 35, ADR 1004): the peers scenario's enqueue
 * work (TypeORM's `transaction()`, a contact through the manager, then `enqueue`), one connection, commits back to
 * back, with every insert carrying the wake-up (the pacer's gap forced to almost nothing, so that each insert finds
 * it passed) against none (`relay.wakeUps: 'off'`). Both apps open at once, TURNS turns of COMMITS commits each in
 * ABBA order. Per commit: Node CPU (all threads and the main thread alone, from the scheduler's own ns counts,
 * /proc/self/task/* /schedstat), the server backend's CPU (its schedstat: the server must run on this machine),
 * event-loop turns, system calls and bytes read and written by this process (/proc/self/io), and JS heap bytes
 * allocated (heap growth plus what the collections freed, `v8.GCProfiler`). The counts are what decide: they do
 * not move with the machine's load.
 * PROFILE_ONLY=<variant> runs that one variant for PROFILE_COMMITS (default 20,000) and nothing else, for
 * `node --cpu-prof`.
 */
import 'reflect-metadata';
import { readdirSync, readFileSync } from 'node:fs';
import { GCProfiler } from 'node:v8';
import { performance } from 'node:perf_hooks';
import { libraryTransactor, type Transactor } from '../harness/enqueue-transactors';
import { pairedDifference, median } from '../harness/stats';
import { heading, openDecisionDatabase, print } from './decision-server';
import { sampleAllocations } from '../harness/heap-samples';

const COMMITS = Number(process.env.COMMITS ?? 2000);
const TURNS = Number(process.env.TURNS ?? 6);
const PROFILE_COMMITS = Number(process.env.PROFILE_COMMITS ?? 20_000);

const LIBRARY = { side: 'library', business: true, withEvent: true } as const;
const OPENERS: Record<string, (url: string, name: string) => Promise<Transactor>> = {
  "wakeUps 'off'": (url, name) =>
    libraryTransactor(url, 1, { ...LIBRARY, relay: { wakeUps: 'off' } }, name, false),
  'every insert carries': (url, name) =>
    libraryTransactor(url, 1, { ...LIBRARY, policy: { wakeUpGapMs: 1e-9 } }, name, false),
};
const VARIANTS = (process.env.VARIANTS?.split(',') ?? Object.keys(OPENERS)).filter((v) => v in OPENERS);

function applicationName(variant: string): string {
  return `decision-enqueue-carry-${Object.keys(OPENERS).indexOf(variant)}`;
}

/** ns on CPU of every thread of this process, and of its main thread alone. */
function threadsNs(): { all: number; main: number } {
  let all = 0;
  let main = 0;
  for (const tid of readdirSync('/proc/self/task')) {
    let ns: number;
    try {
      ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      continue; // a thread that ended meanwhile
    }
    all += ns;
    if (Number(tid) === process.pid) main = ns;
  }
  return { all, main };
}

function io(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of readFileSync('/proc/self/io', 'utf8').trim().split('\n')) {
    const [key, value] = line.split(':');
    out[key!] = Number(value);
  }
  return out;
}

function backendNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

type Figures = Record<string, number>;

async function measure(transactor: Transactor, backend: number): Promise<Figures> {
  for (let i = 0; i < 100; i++) await transactor.run(0);
  (globalThis as { gc?: () => void }).gc?.();
  const profiler = new GCProfiler();
  const heapBefore = process.memoryUsage().heapUsed;
  const ioBefore = io();
  const loopBefore = performance.nodeTiming.uvMetricsInfo;
  const serverBefore = backendNs(backend);
  profiler.start();
  const before = threadsNs();
  const cpuBefore = process.cpuUsage();
  const began = performance.now();
  for (let i = 0; i < COMMITS; i++) await transactor.run(0);
  const ms = performance.now() - began;
  const cpu = process.cpuUsage(cpuBefore);
  const after = threadsNs();
  const { statistics } = profiler.stop();
  const serverAfter = backendNs(backend);
  const loopAfter = performance.nodeTiming.uvMetricsInfo;
  const ioAfter = io();
  const heapAfter = process.memoryUsage().heapUsed;
  const freed = statistics.reduce(
    (sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize,
    0,
  );
  const per = (value: number): number => value / COMMITS;
  return {
    'commits/s': (COMMITS / ms) * 1000,
    'Node CPU µs (cpuUsage)': per(cpu.user + cpu.system),
    'Node CPU µs, all threads': per((after.all - before.all) / 1000),
    'Node CPU µs, main thread': per((after.main - before.main) / 1000),
    'Node CPU µs, other threads': per((after.all - after.main - (before.all - before.main)) / 1000),
    'server CPU µs': per((serverAfter - serverBefore) / 1000),
    'wall µs': per(ms * 1000),
    'loop turns': per(loopAfter.loopCount - loopBefore.loopCount),
    'loop events': per(loopAfter.events - loopBefore.events),
    'read syscalls': per(ioAfter.syscr! - ioBefore.syscr!),
    'write syscalls': per(ioAfter.syscw! - ioBefore.syscw!),
    'bytes read': per(ioAfter.rchar! - ioBefore.rchar!),
    'bytes written': per(ioAfter.wchar! - ioBefore.wchar!),
    'heap bytes allocated': per(heapAfter - heapBefore + freed),
    collections: per(statistics.length),
  };
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    const apps = new Map<string, Transactor>();
    const backends = new Map<string, number>();
    for (const variant of VARIANTS) {
      apps.set(variant, await OPENERS[variant]!(db.url, applicationName(variant)));
      await apps.get(variant)!.run(0);
      const rows = await db.sql<{ pid: number }>(
        `select pid from pg_stat_activity where application_name = $1`,
        [applicationName(variant)],
      );
      if (rows.length !== 1) throw new Error(`${variant}: ${rows.length} backends, expected 1`);
      backends.set(variant, rows[0]!.pid);
    }
    try {
      const only = process.env.PROFILE_ONLY;
      if (only) {
        const app = apps.get(only)!;
        const work = async (): Promise<void> => {
          for (let i = 0; i < PROFILE_COMMITS; i++) await app.run(0);
        };
        for (let i = 0; i < 500; i++) await app.run(0);
        if (process.env.HEAP_SAMPLES) await sampleAllocations(process.env.HEAP_SAMPLES, work);
        else await work();
        return;
      }
      heading(`Carried wake-up, one connection, ${TURNS} turns of ${COMMITS} commits (ABBA)`, serverVersion);
      const figures = new Map<string, Map<string, number[]>>();
      for (let turn = 0; turn < TURNS; turn++) {
        const order = turn % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
        for (const variant of order) {
          const result = await measure(apps.get(variant)!, backends.get(variant)!);
          for (const [figure, value] of Object.entries(result)) {
            if (!figures.has(figure)) figures.set(figure, new Map(VARIANTS.map((v) => [v, []])));
            figures.get(figure)!.get(variant)!.push(value);
          }
        }
      }
      const [base, ...others] = VARIANTS;
      for (const [figure, byVariant] of figures) {
        const cells = VARIANTS.map((v) => {
          const values = byVariant.get(v)!;
          return `${v}: ${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
        });
        const paired = others.map((v) => {
          const d = pairedDifference(byVariant.get(v)!, byVariant.get(base!)!);
          return `Δ ${fmt(d.median)} [${fmt(d.q1)}, ${fmt(d.q3)}]`;
        });
        print(`  ${figure.padEnd(28)} ${cells.join('; ')}; ${paired.join('; ')}`);
      }
    } finally {
      for (const app of apps.values()) await app.close();
    }
  } finally {
    await close();
  }
}

function fmt(value: number): string {
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
