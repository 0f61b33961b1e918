/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/latency-cpu.ts`
 *
 * What a relay costs per event at a low, steady rate (ADR 1005, issue 35): a producer commits RATE events a
 * second (default 100) for SECONDS (default 20) after WARMUP_SECONDS untimed (default 1); one no-op consumer handles them. Two
 * relays, each in a child process of its own so that its Node CPU and allocation are its own, in turns (forward,
 * then backward), TURNS times (default 3):
 * - the library: an app with `relay.enabled` and the default options, woken by the NOTIFY of a producer app that
 *   does not relay (the parent: TypeORM's `transaction()`, a contact, `enqueue`);
 * - the raw relay woken by LISTEN/NOTIFY (`bench/raw/notify-relay.ts`), the parent committing with plain `pg`
 *   and sending `pg_notify` after commit, as the latency scenario's baseline does.
 * Per event: the child's Node CPU (`process.cpuUsage`, user + system, every thread; and its main thread's alone,
 * from /proc: the rest is V8's background work, mostly the optimizing compiler while the code warms), its PostgreSQL backends' CPU (from /proc,
 * by `application_name`: the relay's connections, its LISTEN one included), and the bytes the child allocated on
 * V8's heap — exact, not sampled: `v8.GCProfiler` reports the heap used before and after every collection, so
 * allocated = used at the end − used at the start + what every collection freed. (`--heap-prof` samples, and
 * keeps only what is live when it stops; `process.memoryUsage()` says what is live, not what was allocated;
 * Node 20's `v8.getHeapStatistics()` has no allocation total.) Latency p50/p99 from commit (in the parent) to
 * handler (in the child), on the system's monotonic clock (`process.hrtime`, shared by processes on Linux).
 * The library runs as shipped, with each mechanism of ADR 1005 switched off, and from another checkout when
 * BASE_TREE is set (`SIDES` below; SIDES=a,b runs only those). Then, in one more run per side with the driver's `query` counted (not in the timed runs: the count allocates),
 * statements and round trips per event of the relay's connections (a statement written on a pipelined
 * connection while an earlier one waits travels in its round trip), and the async resources its process made
 * per event, by type (`async_hooks`: promises, timers, immediates; with the hook on, each `await` makes one more
 * promise, on every side alike).
 *
 * PROFILE=dir: the library's child also profiles its timed part, through the inspector — CPU (`Profiler`) and
 * allocation (`HeapProfiler.startSampling` with the objects collected since included, every PROFILE_INTERVAL bytes,
 * default 4 KB: what was allocated, not what stayed) — into dir/latency-library-<pid>.cpuprofile and .heapprofile (the figures of such
 * a run carry the profilers' cost). PROFILE_ALLOCATION=0: the CPU profile alone (the allocation sampler takes a
 * stack at each of its samples, which the CPU profile charges to the frames that allocate).
 *
 * PROMISE_SITES=dir: the counted run of each side also writes where its promises were made during its counted
 * part, into dir/promise-sites-<pid>.txt (count, then the four innermost frames of the project and its packages;
 * a promise made by the microtask queue alone — a promise adopting another — names the site of the promise that
 * made it): which async layers, awaits and `then`s a round goes through (issue 35). A stack per promise: slow, so
 * rounds there take more events than in the other runs; divide by the claims, not the events.
 */
import 'reflect-metadata';
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createHook } from 'node:async_hooks';
import { Session } from 'node:inspector';
import { Socket } from 'node:net';
import { join } from 'node:path';
import v8 from 'node:v8';
import { Injectable } from '@nestjs/common';
import pg, { Pool } from 'pg';
import { OnOutboxEvent, OUTBOX_DEFAULTS, type OutboxEvent } from 'nestjs-pg-outbox';
import { createBenchApp, type BenchApp } from '../harness/bench-app';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { BENCH_EVENT, BENCH_TENANT } from '../harness/bench-database';
import { cpuSpentMs, readBackendCpu, type BackendCpuSample } from '../harness/backend-cpu';
import { commitContactEvent, commitRawContactEvent } from '../harness/latency-runs';
import { percentile, sleep, waitUntil } from '../harness/stats';
import { NotifyRelay, RAW_NOTIFY_CHANNEL } from '../raw/notify-relay';
import { notify } from '../raw/raw.queries';
import { RawSession } from '../raw/raw-session';
import { compare, heading, inTurns, openDecisionDatabase, print } from './decision-server';
import { whenAnswered } from '../../tools/round-trip-probe';

const RATE = Number(process.env.RATE ?? 100);
const SECONDS = Number(process.env.SECONDS ?? 20);
const TURNS = Number(process.env.TURNS ?? 3);
/**
 * Untimed seconds at RATE before each timed run (default 1). At 100 events/s V8 is still optimizing the relay's
 * code for several seconds, on its background threads, which `process.cpuUsage` counts.
 */
const WARMUP_SECONDS = Number(process.env.WARMUP_SECONDS ?? 1);

/**
 * The relays compared: the library as shipped, the library with switches of its policy (the mechanisms of ADR
 * 1005 off, to measure each against its absence), the raw relay.
 */
const SIDES = {
  'library (as shipped)': {},
  'library, oneWrite off': { oneWrite: false },
  'library (pacedScans off)': { pacedScans: false },
  'library (BASE_TREE)': {},
  'raw NOTIFY relay': null,
} as const satisfies Record<string, Partial<RelayPolicy> | null>;
type Side = keyof typeof SIDES;
const RAW: Side = 'raw NOTIFY relay';
/**
 * Another checkout of the project (BASE_TREE=dir, with this script copied into it and its node_modules): its
 * library runs as the side 'library (BASE_TREE)', to measure a change against the commit before it in one run.
 */
const BASE_TREE = process.env.BASE_TREE?.trim() || null;
const BASE: Side = 'library (BASE_TREE)';
/** Only these sides, when set: their names, comma-separated. */
const ONLY = process.env.SIDES?.split(',').map((name) => name.trim());
/** Where the counted runs write where their promises were made (PROMISE_SITES above), or null. */
const PROMISE_SITES = process.env.PROMISE_SITES?.trim() || null;
const NAMES = (Object.keys(SIDES) as Side[]).filter(
  (side) => (side !== BASE || BASE_TREE !== null) && (!ONLY || ONLY.includes(side)),
);

/** The relay's connections, whose backends' CPU is counted. */
function relayApplicationNames(side: Side): readonly string[] {
  return side === RAW ? ['bench-raw-listener', 'bench-raw-relay'] : ['decision-latency-relay'];
}

/** Milliseconds on the system's monotonic clock (the same in every process of the machine). */
function clock(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

// ---- the child: one relay, driven by the parent's messages ----

type ToChild = { type: 'count' } | { type: 'start' } | { type: 'stop' } | { type: 'exit' };
type FromChild =
  | { type: 'ready' }
  | { type: 'count'; handled: number }
  | {
      type: 'stopped';
      handled: [string, number][];
      cpuUs: number;
      mainThreadUs: number;
      allocatedBytes: number;
      statements: number;
      roundTrips: number;
      writes: number;
      texts: [string, number][];
      asyncResources?: [string, number][];
    };

/** Where the child's handler writes: one per child process. */
const handledAt = new Map<string, number>();

@Injectable()
class ClockedConsumer {
  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.latency' })
  handle(event: OutboxEvent): void {
    if (!handledAt.has(event.eventId)) handledAt.set(event.eventId, clock());
  }
}

/**
 * What the counting run counts; `texts`: statements by their start; `asyncResources`: the async resources made
 * (promises, timers, immediates, ticks…), by type.
 */
interface Counts {
  statements: number;
  roundTrips: number;
  writes: number;
  texts: Map<string, number>;
  asyncResources: Map<string, number>;
  /** With PROMISE_SITES: the promises made, by where (see `promiseSite`). */
  promiseSites: Map<string, number> | null;
}

/**
 * Counts every `query` of every pg connection of this process (statements, and round trips as the probe does),
 * and the process's socket writes (a `writev` of several statements counts once).
 */
function countQueries(): Counts {
  const counts: Counts = {
    statements: 0,
    roundTrips: 0,
    writes: 0,
    texts: new Map(),
    asyncResources: new Map(),
    promiseSites: PROMISE_SITES === null ? null : new Map(),
  };
  const resources = counts.asyncResources;
  const sites = counts.promiseSites;
  // each promise's site, for those the microtask queue makes from it (their own stack has no frame of ours)
  const siteOf = new Map<number, string>();
  createHook({
    init: (id, type, trigger) => {
      resources.set(type, (resources.get(type) ?? 0) + 1);
      if (sites === null || type !== 'PROMISE') return;
      const site = promiseSite(siteOf.get(trigger));
      siteOf.set(id, site);
      sites.set(site, (sites.get(site) ?? 0) + 1);
    },
  }).enable();
  // every write or writev of a socket goes through this (Node's internal, a bench's count only)
  const socket = Socket.prototype as unknown as { _writeGeneric: (...args: unknown[]) => unknown };
  const writeGeneric = socket._writeGeneric;
  socket._writeGeneric = function (this: Socket, ...args: unknown[]) {
    counts.writes++;
    return writeGeneric.apply(this, args);
  };
  const inFlight = new WeakMap<object, number>();
  const original = Object.getOwnPropertyDescriptor(pg.Client.prototype, 'query')!.value as (
    ...args: unknown[]
  ) => unknown;
  pg.Client.prototype.query = function (this: pg.Client & { pipeline?: boolean }, ...args: unknown[]) {
    const busy = inFlight.get(this) ?? 0;
    counts.statements++;
    const config = args[0] as string | { text?: string; name?: string };
    const text =
      typeof config === 'string' ? config : `${config.name ? `[${config.name}] ` : ''}${config.text}`;
    const key = text.replace(/\s+/g, ' ').trim().slice(0, 70);
    counts.texts.set(key, (counts.texts.get(key) ?? 0) + 1);
    if (!this.pipeline || busy === 0) counts.roundTrips++;
    inFlight.set(this, busy + 1);
    const done = (): void => void inFlight.set(this, (inFlight.get(this) ?? 1) - 1);
    const result = original.apply(this, args);
    whenAnswered(result, done);
    return result;
  } as typeof pg.Client.prototype.query;
  return counts;
}

/**
 * Where a promise is being made: the four innermost frames of the stack outside Node's internals and this script,
 * or, with none but a `then` (a promise adopting another, from the microtask queue), that and the site of the
 * promise it came from (`triggerSite`).
 */
function promiseSite(triggerSite: string | undefined): string {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 16;
  const stack = new Error().stack!.split('\n').slice(1);
  Error.stackTraceLimit = limit;
  const frames = stack
    .filter((line) => !line.includes('node:internal') && !line.includes('latency-cpu.ts'))
    .slice(0, 4)
    .map((line) =>
      line
        .trim()
        .replace(/^at /, '')
        .replace(process.cwd() + '/', '')
        .replace('node_modules/', ''),
    );
  const site = frames.join(' < ');
  return frames.length <= 1 ? `${site} [from ${triggerSite ?? '?'}]`.slice(0, 400) : site;
}

/**
 * CPU of this process's main thread, user + system, in µs (from /proc, in clock ticks of 10 ms: over a run of
 * 1,500 events, 7 µs per event). The rest of `process.cpuUsage` is V8's and libuv's other threads: the optimizing
 * compiler's concurrent jobs, the collector's parallel and concurrent work.
 */
function mainThreadCpuUs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime, fields 14 and 15 of stat(5) (11 and 12 after the command's closing parenthesis)
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS_PER_SECOND;
}

/** USER_HZ of Linux's /proc figures (100 on every architecture Node runs on). */
const CLOCK_TICKS_PER_SECOND = 100;

/** The timed part's CPU and allocation profiles, through the inspector (see PROFILE above). */
async function startProfiles(dir: string): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) =>
      session.post(method, params, (error, result) =>
        error ? reject(error) : resolve((result ?? {}) as Record<string, unknown>),
      ),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
  // the allocation sampler takes a stack at each sample, charged to the allocating frame in the CPU profile
  const heapSampling = process.env.PROFILE_ALLOCATION !== '0';
  if (heapSampling) {
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', {
      samplingInterval: Number(process.env.PROFILE_INTERVAL ?? 4096),
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  return async () => {
    const { profile: cpu } = await post('Profiler.stop');
    const base = join(dir, `latency-library-${process.pid}`);
    writeFileSync(`${base}.cpuprofile`, JSON.stringify(cpu));
    if (heapSampling) {
      const { profile: heap } = await post('HeapProfiler.stopSampling');
      writeFileSync(`${base}.heapprofile`, JSON.stringify(heap));
    }
    session.disconnect();
  };
}

async function child(side: Side, url: string, counting: boolean, profileDir: string): Promise<void> {
  const counts = counting
    ? countQueries()
    : {
        statements: 0,
        roundTrips: 0,
        writes: 0,
        texts: new Map(),
        asyncResources: new Map(),
        promiseSites: null,
      };
  let stop: () => Promise<void>;
  if (side !== RAW) {
    // scheduled mode with the default poll interval, listening for wake-ups: what OutboxModule.forRoot() gives
    const app = await createBenchApp({
      url,
      consumers: [ClockedConsumer],
      relay: { enabled: true },
      applicationName: relayApplicationNames(side)[0],
      probe: false,
      policy: SIDES[side] ?? {},
    });
    stop = () => app.close();
  } else {
    const relay = await NotifyRelay.start(url, {
      tenantId: BENCH_TENANT,
      batchSize: OUTBOX_DEFAULTS.relay.batchSize,
      consumers: ['bench.latency'],
      onDelivery: (event) => {
        if (!handledAt.has(event.id)) handledAt.set(event.id, clock());
      },
    });
    stop = () => relay.stop();
  }
  const send = (message: FromChild): void => void process.send!(message);
  let began: {
    cpu: NodeJS.CpuUsage;
    mainThreadUs: number;
    used: number;
    statements: number;
    roundTrips: number;
    writes: number;
  } | null = null;
  let profiler: v8.GCProfiler | null = null;
  let stopProfiles: Promise<() => Promise<void>> | null = null;
  process.on('message', (message: ToChild) => {
    if (message.type === 'count') send({ type: 'count', handled: handledAt.size });
    else if (message.type === 'start') {
      handledAt.clear();
      if (profileDir) stopProfiles = startProfiles(profileDir);
      profiler = new v8.GCProfiler();
      profiler.start();
      began = {
        cpu: process.cpuUsage(),
        mainThreadUs: mainThreadCpuUs(),
        used: v8.getHeapStatistics().used_heap_size,
        statements: counts.statements,
        roundTrips: counts.roundTrips,
        writes: counts.writes,
      };
      counts.texts.clear();
      counts.asyncResources.clear();
      counts.promiseSites?.clear();
    } else if (message.type === 'stop') {
      if (counts.promiseSites && PROMISE_SITES !== null)
        writeFileSync(
          join(PROMISE_SITES, `promise-sites-${process.pid}.txt`),
          [...counts.promiseSites]
            .sort((a, b) => b[1] - a[1])
            .map(([site, count]) => `${count}\t${site}`)
            .join('\n'),
        );
      const cpu = process.cpuUsage(began!.cpu);
      const mainThreadUs = mainThreadCpuUs() - began!.mainThreadUs;
      const used = v8.getHeapStatistics().used_heap_size;
      const statements = counts.statements - began!.statements;
      const roundTrips = counts.roundTrips - began!.roundTrips;
      const writes = counts.writes - began!.writes;
      const { statistics } = profiler!.stop();
      const freed = statistics.reduce(
        (sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize,
        0,
      );
      send({
        type: 'stopped',
        handled: [...handledAt],
        cpuUs: cpu.user + cpu.system,
        mainThreadUs,
        allocatedBytes: used - began!.used + freed,
        statements,
        roundTrips,
        writes,
        texts: [...counts.texts],
        asyncResources: [...counts.asyncResources],
      });
      // the relay's connections stay open until the parent has read their backends' CPU
      void (stopProfiles ?? Promise.resolve(async () => undefined)).then((stopped) => stopped());
    } else if (message.type === 'exit') {
      void stop().then(() => process.exit(0));
    }
  });
  send({ type: 'ready' });
}

// ---- the parent: producers, turns, figures ----

/** Commits one event and wakes the relay as its side does; resolves once committed. */
type Producer = { produce: () => Promise<string>; close: () => Promise<void> };

async function libraryProducer(url: string): Promise<Producer> {
  // a web instance's app: it does not relay, so it sends the wake-up NOTIFY after each commit (the default)
  const app: BenchApp = await createBenchApp({
    url,
    consumers: [],
    relay: { enabled: false },
    applicationName: 'decision-latency-producer',
    probe: false,
  });
  return { produce: () => commitContactEvent(app), close: () => app.close() };
}

async function rawProducer(url: string): Promise<Producer> {
  const pool = new Pool({ connectionString: url, max: 10, application_name: 'bench-raw-producer' });
  const notifier = await RawSession.connect(url, 'bench-raw-notifier');
  let notifying: Promise<unknown> = Promise.resolve();
  return {
    produce: async () => {
      const id = await commitRawContactEvent(pool);
      // one connection sends the notifications, one after another
      notifying = notifying.then(() => notifier.rows(notify(RAW_NOTIFY_CHANNEL)));
      void notifying.catch(() => undefined);
      return id;
    },
    close: async () => {
      await notifying.catch(() => undefined);
      await notifier.end();
      await pool.end();
    },
  };
}

/** A child relay: messages to it, and its next answer of a type. */
class RelayChild {
  private constructor(private readonly process: ChildProcess) {}

  static async start(side: Side, url: string, counting: boolean): Promise<RelayChild> {
    const profile = side === NAMES[0] && !counting ? (process.env.PROFILE ?? '') : '';
    const args = ['child', side, url, counting ? 'count' : '', profile];
    const forked =
      side === BASE && BASE_TREE
        ? fork(join(BASE_TREE, 'bench/decisions/latency-cpu.ts'), args, { cwd: BASE_TREE })
        : fork(__filename, args);
    const relay = new RelayChild(forked);
    await relay.next('ready');
    return relay;
  }

  next<T extends FromChild['type']>(type: T): Promise<Extract<FromChild, { type: T }>> {
    return new Promise((resolve, reject) => {
      const onMessage = (message: FromChild): void => {
        if (message.type !== type) return;
        this.process.off('message', onMessage);
        this.process.off('exit', onExit);
        resolve(message as Extract<FromChild, { type: T }>);
      };
      const onExit = (code: number | null): void =>
        reject(new Error(`the relay's child process exited (code ${code}) before answering "${type}"`));
      this.process.on('message', onMessage);
      this.process.once('exit', onExit);
    });
  }

  async handled(): Promise<number> {
    const answer = this.next('count');
    this.process.send({ type: 'count' } satisfies ToChild);
    return (await answer).handled;
  }

  send(message: ToChild): void {
    this.process.send(message);
  }

  async exited(): Promise<void> {
    if (this.process.exitCode !== null) return;
    await new Promise((resolve) => this.process.once('exit', resolve));
  }
}

/** Commits `count` events at RATE a second, on schedule even when a commit is slow. */
async function produceSteadily(
  producer: Producer,
  count: number,
  committedAt: Map<string, number>,
): Promise<void> {
  const began = clock();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const wait = began + (i * 1000) / RATE - clock();
    if (wait >= 1) await sleep(wait);
    inFlight.push(producer.produce().then((id) => void committedAt.set(id, clock())));
  }
  await Promise.all(inFlight);
}

type Figure =
  | 'Node CPU µs/event'
  | 'Node CPU, main thread µs/event'
  | 'Node CPU, other threads µs/event'
  | 'PostgreSQL CPU µs/event'
  | 'Node + PostgreSQL CPU µs/event'
  | 'KB allocated/event'
  | 'p50 ms'
  | 'p99 ms'
  | 'statements/event'
  | 'round trips/event'
  | 'socket writes/event'
  | 'promises/event'
  | 'timers/event';

/** The backends' CPU; read again when one exited between the listing and its /proc (a pool closing an idle one). */
async function backendCpu(
  query: Parameters<typeof readBackendCpu>[0],
  names: readonly string[],
): Promise<BackendCpuSample> {
  for (let attempt = 0; ; attempt++) {
    const sample = await readBackendCpu(query, names);
    if (sample !== null || attempt === 2) return sample;
  }
}

async function measure(
  side: Side,
  url: string,
  query: Parameters<typeof readBackendCpu>[0],
  counting: boolean,
): Promise<Partial<Record<Figure, number>>> {
  const relay = await RelayChild.start(side, url, counting);
  const producer = side === RAW ? await rawProducer(url) : await libraryProducer(url);
  const committedAt = new Map<string, number>();
  try {
    const waitForAll = async (count: number): Promise<void> => {
      const timeoutMs = 3 * OUTBOX_DEFAULTS.relay.pollIntervalMs + 10_000;
      if (!(await waitUntil(async () => (await relay.handled()) >= count, timeoutMs)))
        throw new Error(`${side}: ${count} events committed, not all handled within ${timeoutMs} ms`);
    };
    // untimed seconds (WARMUP_SECONDS, default 1): code, connections and plans warm
    await produceSteadily(producer, RATE * WARMUP_SECONDS, committedAt);
    await waitForAll(RATE * WARMUP_SECONDS);
    committedAt.clear();
    const events = Math.round(RATE * (counting ? Math.min(SECONDS, 5) : SECONDS));
    const cpuBefore = await backendCpu(query, relayApplicationNames(side));
    relay.send({ type: 'start' });
    await produceSteadily(producer, events, committedAt);
    await waitForAll(events);
    const stopped = relay.next('stopped');
    relay.send({ type: 'stop' });
    const result = await stopped;
    const postgresMs = cpuSpentMs(cpuBefore, await backendCpu(query, relayApplicationNames(side)));
    if (counting) {
      print(`  ${side}: statements per 100 events, by their start`);
      for (const [text, count] of result.texts.sort((a, b) => b[1] - a[1]))
        print(`    ${((count * 100) / events).toFixed(1).padStart(6)}  ${text}`);
      const resources = new Map(result.asyncResources ?? []);
      if (resources.size > 0) {
        print(`  ${side}: async resources per event, by type`);
        for (const [type, count] of [...resources].sort((a, b) => b[1] - a[1]))
          print(`    ${(count / events).toFixed(2).padStart(6)}  ${type}`);
      }
      return {
        'promises/event': (resources.get('PROMISE') ?? Number.NaN) / events,
        'timers/event': (resources.get('Timeout') ?? Number.NaN) / events,
        'statements/event': result.statements / events,
        'round trips/event': result.roundTrips / events,
        'socket writes/event': result.writes / events,
      };
    }
    const latencies = result.handled.map(([id, at]) => at - committedAt.get(id)!);
    const nodeUs = result.cpuUs / events;
    const postgresUs = postgresMs === null ? Number.NaN : (postgresMs * 1000) / events;
    return {
      'Node CPU µs/event': nodeUs,
      'Node CPU, main thread µs/event': result.mainThreadUs / events,
      'Node CPU, other threads µs/event': nodeUs - result.mainThreadUs / events,
      'PostgreSQL CPU µs/event': postgresUs,
      'Node + PostgreSQL CPU µs/event': nodeUs + postgresUs,
      'KB allocated/event': result.allocatedBytes / 1024 / events,
      'p50 ms': percentile(latencies, 50),
      'p99 ms': percentile(latencies, 99),
    };
  } finally {
    await producer.close();
    relay.send({ type: 'exit' });
    await relay.exited();
  }
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const query = db.sql.bind(db) as Parameters<typeof readBackendCpu>[0];
  try {
    heading(
      `${RATE} events/s for ${SECONDS} s per run after ${WARMUP_SECONDS} s untimed, one no-op consumer, relay in a child process, ${TURNS} turns`,
      serverVersion,
    );
    const run = async (side: Side, counting: boolean): Promise<Partial<Record<Figure, number>>> => {
      await db.truncate();
      // each run starts from a checkpoint: one forced mid-run would land on one side only
      await db.checkpoint();
      return measure(side, db.url, query, counting);
    };
    const figures = await inTurns<Side, Figure>(NAMES, TURNS, (side) => run(side, false) as never);
    for (const [figure, runs] of figures) compare(figure, figure.includes('ms') ? 'ms' : '', runs);
    const counted = await inTurns<Side, Figure>(NAMES, 1, (side) => run(side, true) as never);
    for (const [figure, runs] of counted) compare(`${figure} (one run of ≤ 5 s, counted)`, '', runs);
  } finally {
    await close();
  }
}

if (process.argv[2] === 'child') {
  const [, , , side, url, counting, profileDir] = process.argv;
  void child(side as Side, url!, counting === 'count', profileDir ?? '').catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
} else {
  void main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
