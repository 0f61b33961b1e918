/**
 * `node --expose-gc --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-alloc.ts`
 *
 * Bytes of JS heap allocated per commit of the peers scenario's enqueue work (TypeORM's `transaction()`, a contact
 * through the manager, then the event), one connection, commits back to back: the hand-written insert through the
 * manager (the raw line) against the library. A deterministic figure on a shared machine, where CPU timings drift:
 * the heap's growth over the COMMITS measured plus what the collections meanwhile freed (`v8.GCProfiler`) is what
 * they allocated.
 * Also Node CPU per commit over the same commits (supporting evidence only: it moves with the machine's load).
 * Variants: `raw` (the peers scenario's raw line), `library` (as shipped), `library, wakeUps off` (no NOTIFY).
 * VARIANTS (comma-separated, default all) picks variants; PROFILE_ONLY=<variant> runs that one for PROFILE_COMMITS
 * (default 20,000) and nothing else, for `node --cpu-prof`; PROFILE_ONLY=alone measures `enqueue`'s own bytes per
 * call with its I/O stubbed (then told of the commit, as TypeORM tells its subscribers). HEAP_SAMPLES=<file> writes
 * V8's sampled allocations (collected objects included) of the PROFILE_ONLY run as a .heapprofile.
 */
import 'reflect-metadata';
import { GCProfiler } from 'node:v8';
import { ONE_CONNECTION_ENQUEUES, stubbedEnqueue, type Transactor } from '../harness/enqueue-transactors';
import { heading, openDecisionDatabase, print } from './decision-server';
import { sampleAllocations } from '../harness/heap-samples';

const COMMITS = Number(process.env.COMMITS ?? 3000);
const TURNS = Number(process.env.TURNS ?? 4);
const PROFILE_COMMITS = Number(process.env.PROFILE_COMMITS ?? 20_000);
const OPENERS = ONE_CONNECTION_ENQUEUES;

function collect(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function measure(transactor: Transactor): Promise<{ bytes: number; cpu: number; gcs: number }> {
  for (let i = 0; i < 200; i++) await transactor.run(0);
  collect();
  await new Promise((resolve) => setTimeout(resolve, 20));
  collect();
  const profiler = new GCProfiler();
  const heapBefore = process.memoryUsage().heapUsed;
  profiler.start();
  const cpuBefore = process.cpuUsage();
  for (let i = 0; i < COMMITS; i++) await transactor.run(0);
  const cpu = process.cpuUsage(cpuBefore);
  const heapAfter = process.memoryUsage().heapUsed;
  const { statistics } = profiler.stop();
  // what the collections freed, added to the heap's growth: the bytes allocated meanwhile
  const freed = statistics.reduce(
    (sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize,
    0,
  );
  return {
    bytes: (heapAfter - heapBefore + freed) / COMMITS,
    cpu: (cpu.user + cpu.system) / COMMITS,
    gcs: statistics.length,
  };
}

/** Bytes allocated per call of `work`, over `calls` calls after a tenth as many to warm up (see `measure`). */
async function bytesPerCall(calls: number, work: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < calls / 10; i++) await work(i);
  collect();
  const profiler = new GCProfiler();
  const heapBefore = process.memoryUsage().heapUsed;
  profiler.start();
  for (let i = 0; i < calls; i++) await work(i);
  const heapAfter = process.memoryUsage().heapUsed;
  const { statistics } = profiler.stop();
  const freed = statistics.reduce(
    (sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize,
    0,
  );
  return (heapAfter - heapBefore + freed) / calls;
}

/**
 * `enqueue`'s own allocation, its I/O stubbed (as in enqueue-cpu.ts: a runner whose `pg` client answers at once),
 * then told of the commit as TypeORM tells its subscribers, with `relay.wakeUps: 'off'` (no NOTIFY sent).
 */
async function enqueueAlone(url: string): Promise<void> {
  const stubbed = await stubbedEnqueue(url, 'decision-enqueue-alloc-alone');
  try {
    const committed = stubbed.commit;
    const runs: string[] = [];
    const commits: string[] = [];
    for (let turn = 0; turn < 3; turn++) {
      runs.push((await bytesPerCall(20_000, stubbed.enqueue)).toFixed(0));
      commits.push((await bytesPerCall(20_000, committed)).toFixed(0));
    }
    if (process.env.HEAP_SAMPLES)
      await sampleAllocations(process.env.HEAP_SAMPLES, () => bytesPerCall(20_000, committed));
    print(
      `  enqueue, I/O stubbed: ${runs.join(' ')} bytes per call; with the commit's subscriber: ${commits.join(' ')}`,
    );
  } finally {
    await stubbed.close();
  }
}

async function main(): Promise<void> {
  if (typeof (globalThis as { gc?: unknown }).gc !== 'function') throw new Error('run with --expose-gc');
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `Heap bytes and Node CPU per enqueue commit, 1 connection, ${COMMITS} commits per turn`,
      serverVersion,
    );
    const only = process.env.PROFILE_ONLY;
    if (only === 'alone') return await enqueueAlone(db.url);
    if (only) {
      const transactor = await OPENERS[only]!(db.url, 'decision-enqueue-alloc');
      const cpuBefore = process.cpuUsage();
      const commits = async (): Promise<void> => {
        for (let i = 0; i < PROFILE_COMMITS; i++) await transactor.run(0);
      };
      if (process.env.HEAP_SAMPLES) await sampleAllocations(process.env.HEAP_SAMPLES, commits);
      else await commits();
      const cpu = process.cpuUsage(cpuBefore);
      print(`  ${only}: ${((cpu.user + cpu.system) / PROFILE_COMMITS).toFixed(1)} µs Node CPU per commit`);
      await transactor.close();
      return;
    }
    const variants = process.env.VARIANTS?.split(',') ?? Object.keys(OPENERS);
    const transactors = new Map<string, Transactor>();
    for (const [i, variant] of variants.entries())
      transactors.set(variant, await OPENERS[variant]!(db.url, `decision-enqueue-alloc-${i}`));
    const figures = new Map(variants.map((v) => [v, [] as { bytes: number; cpu: number; gcs: number }[]]));
    for (let turn = 0; turn < TURNS; turn++) {
      const order = turn % 2 === 0 ? variants : [...variants].reverse();
      for (const variant of order) figures.get(variant)!.push(await measure(transactors.get(variant)!));
    }
    for (const [variant, runs] of figures) {
      print(
        `  ${variant.padEnd(24)} bytes/commit ${runs.map((r) => r.bytes.toFixed(0)).join(' ')}` +
          `  · collections ${runs.map((r) => r.gcs).join(' ')}` +
          `  · Node µs/commit ${runs.map((r) => r.cpu.toFixed(0)).join(' ')}`,
      );
    }
    for (const transactor of transactors.values()) await transactor.close();
  } finally {
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
