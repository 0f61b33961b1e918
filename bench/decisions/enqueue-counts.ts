/**
 * `node --expose-gc --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-counts.ts`
 *
 * What one commit of the peers scenario's enqueue work (TypeORM's `transaction()`, a contact through the manager,
 * then the event; one connection, commits back to back) costs Node in figures that do not move with the
 * machine's load: bytes of JS heap allocated (the heap's growth plus what the collections freed,
 * `v8.GCProfiler`), promises created (`async_hooks`, as latency-cpu.ts counts them), and bytes written to the
 * sockets (every socket of the process: the transaction's, and a wake-up NOTIFY's when one goes on a pooled
 * connection). Variants: `raw` (the hand-written insert through the same manager, the peers scenario's raw
 * line), `library, wakeUps off`, `library` (as shipped); the library's own share is its figure less raw's.
 * Then `enqueue` alone with its I/O stubbed (the runner's `pg` client answers at once): bytes and promises per
 * call. COMMITS (default 3,000) per turn, TURNS (default 3) in alternating order.
 */
import 'reflect-metadata';
import { createHook } from 'node:async_hooks';
import { GCProfiler } from 'node:v8';
import { Socket } from 'node:net';
import { ONE_CONNECTION_ENQUEUES, stubbedEnqueue, type Transactor } from '../harness/enqueue-transactors';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const COMMITS = Number(process.env.COMMITS ?? 3000);
const TURNS = Number(process.env.TURNS ?? 3);
const OPENERS = ONE_CONNECTION_ENQUEUES;

/** Promises created so far in this process. */
let promises = 0;
const promiseHook = createHook({
  init: (_id, type) => {
    if (type === 'PROMISE') promises++;
  },
});

/** Bytes written to sockets so far (every `write`/`writev` of a socket goes through `_writeGeneric`). */
let socketBytes = 0;
const socket = Socket.prototype as unknown as { _writeGeneric: (...args: unknown[]) => unknown };
const writeGeneric = socket._writeGeneric;
socket._writeGeneric = function (this: Socket, ...args: unknown[]) {
  const [writev, data] = args;
  if (writev) for (const { chunk } of data as { chunk: Buffer | string }[]) socketBytes += byteLength(chunk);
  else socketBytes += byteLength(data as Buffer | string);
  return writeGeneric.apply(this, args);
};

function byteLength(chunk: Buffer | string): number {
  return typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
}

function collect(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

interface Counts {
  bytes: number;
  promises: number;
  sent: number;
}

/**
 * Per call of `work`, over `calls` calls after a tenth as many to warm up; the promises counted over a tenth as
 * many again, apart (V8 makes more promises, and allocates more, while a promise hook is on).
 */
async function perCall(calls: number, work: (i: number) => Promise<unknown>): Promise<Counts> {
  for (let i = 0; i < calls / 10; i++) await work(i);
  promiseHook.enable();
  const promisesBefore = promises;
  for (let i = 0; i < calls / 10; i++) await work(i);
  const made = promises - promisesBefore;
  promiseHook.disable();
  collect();
  const profiler = new GCProfiler();
  const heapBefore = process.memoryUsage().heapUsed;
  const sentBefore = socketBytes;
  profiler.start();
  for (let i = 0; i < calls; i++) await work(i);
  const sent = socketBytes - sentBefore;
  const heapAfter = process.memoryUsage().heapUsed;
  const { statistics } = profiler.stop();
  // what the collections freed, added to the heap's growth: the bytes allocated meanwhile
  const freed = statistics.reduce(
    (sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize,
    0,
  );
  return {
    bytes: (heapAfter - heapBefore + freed) / calls,
    promises: made / (calls / 10),
    sent: sent / calls,
  };
}

function line(label: string, runs: readonly Counts[]): string {
  const of = (pick: (c: Counts) => number, digits: number): string =>
    runs.map((r) => pick(r).toFixed(digits)).join(' ');
  return (
    `  ${label.padEnd(24)} bytes allocated ${of((r) => r.bytes, 0)} · promises ${of((r) => r.promises, 2)}` +
    ` · bytes sent ${of((r) => r.sent, 1)}`
  );
}

/** `enqueue` alone, its I/O stubbed, then told of the commit as TypeORM tells its subscribers. */
async function enqueueAlone(url: string): Promise<void> {
  const stubbed = await stubbedEnqueue(url, 'decision-enqueue-counts-alone');
  try {
    const runs: Counts[] = [];
    for (let turn = 0; turn < TURNS; turn++) runs.push(await perCall(20_000, stubbed.commit));
    print(line('enqueue, I/O stubbed', runs));
  } finally {
    await stubbed.close();
  }
}

async function main(): Promise<void> {
  if (typeof (globalThis as { gc?: unknown }).gc !== 'function') throw new Error('run with --expose-gc');
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(`Node's work per enqueue commit, 1 connection, ${COMMITS} commits per turn`, serverVersion);
    const variants = process.env.VARIANTS?.split(',') ?? Object.keys(OPENERS);
    const transactors = new Map<string, Transactor>();
    for (const [i, variant] of variants.entries())
      transactors.set(variant, await OPENERS[variant]!(db.url, `decision-enqueue-counts-${i}`));
    const figures = new Map(variants.map((v) => [v, [] as Counts[]]));
    for (let turn = 0; turn < TURNS; turn++) {
      const order = turn % 2 === 0 ? variants : [...variants].reverse();
      for (const variant of order) {
        const transactor = transactors.get(variant)!;
        figures.get(variant)!.push(await perCall(COMMITS, () => transactor.run(0)));
      }
    }
    for (const [variant, runs] of figures) print(line(variant, runs));
    for (const transactor of transactors.values()) await transactor.close();
    await enqueueAlone(db.url);
  } finally {
    await close();
  }
}

exitWhenDone(main());
