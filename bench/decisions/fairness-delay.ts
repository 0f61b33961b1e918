/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/fairness-delay.ts`
 *
 * The small tenant's delay behind a backlog, counted rather than timed (ADR 1106, addendum "the delay in
 * batches"): the bench's fairness run (`bench/scenarios/fairness.scenario.ts`: the relay in the producer's app,
 * the library's defaults, a small tenant committing RATE events a second while another tenant drains BACKLOG
 * events, default 50,000) with an observer on the relay's hooks. For each of the small tenant's events, from its
 * commit (done, where the bench's clock starts): the backlogged tenant's events handled before the small one's
 * handler ran, its claims that came back before the small one's claim, and the rounds that ended meanwhile (the
 * event waited for a round's end: a lane free for tenants woken during a round did not take it). Issue 36's bound
 * is "about one batch": `relay.batchSize` events. Commit → handler in ms beside them, secondary (the machine's
 * load moves it), split into commit → the small claim sent (a wait for a lane or a round) and the claim's round
 * trip (sent → answer taken); and, over the timed window, the event loop's delay (p99, max) and utilization, this
 * process's CPU, `select 1` round trips from this process and from another (bench/workers/select-probe.ts: the
 * relay's event loop against the server and the machine), the main thread's time on a core and runnable but
 * waiting for one with the machine's idle CPUs (Linux's /proc: what the loop's busy time is), and the backlog
 * drained (ADR 1106, addenda of 2026-12-07). Variants in turns (TURNS, default 2; VARIANTS picks some,
 * comma-separated): the fair shares on, off, and an idle relay (no backlog).
 */
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Client } from 'pg';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { OutboxInstrumentation } from '../../libs/outbox/src/extension/outbox-instrumentation';
import { OUTBOX_STORE_PORT, type OutboxStorePort } from '../../libs/outbox/src/store/outbox-store.port';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { createBenchApp } from '../harness/bench-app';
import { FairnessConsumer } from '../harness/bench-consumers';
import { BENCH_EVENT } from '../harness/bench-database';
import { percentile, sleep, waitUntil } from '../harness/stats';
import { heading, inTurns, openDecisionDatabase, print, type DecisionDatabase } from './decision-server';

const BIG = '5eb0a1c4-0000-4000-8000-0000000000b1';
const SMALL = '5eb0a1c4-0000-4000-8000-0000000000c1';
const BACKLOG = Number(process.env.BACKLOG ?? 50_000);
const RATE = Number(process.env.RATE ?? 200);
const SECONDS = Number(process.env.SECONDS ?? 3);
/** Untimed: the drain under way, the backlogged tenant's claims grown while it had the relay to itself. */
const WARM_UP_EVENTS = 20;
/** `relay.batchSize` by default: issue 36's "about one batch". */
const BATCH = OUTBOX_DEFAULTS.relay.batchSize;

/** The probe outside this process (`select 1` round trips, see bench/workers/select-probe.ts). */
const PROBE_FILE = join(__dirname, '..', 'workers', 'select-probe.ts');

/**
 * `select 1` round trips every 5 ms over `seconds`, in this process (the relay's event loop) and in another one
 * (the server and the machine alone), ms each.
 */
async function probeRoundTrips(
  url: string,
  seconds: number,
): Promise<{ inside: number[]; outside: number[] }> {
  const child = fork(PROBE_FILE, [url, String(seconds)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const outside = new Promise<number[]>((resolve, reject) => {
    child.once('message', (ms) => resolve(ms as number[]));
    child.once('exit', (code) => reject(new Error(`select-probe exited with ${code} before it answered`)));
  });
  const client = new Client({ connectionString: url });
  await client.connect();
  const inside: number[] = [];
  try {
    for (const end = performance.now() + seconds * 1000; performance.now() < end;) {
      const began = performance.now();
      await client.query('select 1');
      inside.push(performance.now() - began);
      await sleep(5);
    }
  } finally {
    await client.end();
  }
  return { inside, outside: await outside };
}

/** This process's main thread (the event loop) and the machine's CPUs, cumulative (Linux's /proc), ns and ticks. */
interface Cores {
  /** The main thread's time on a core and runnable but waiting for one (`/proc/self/task/<pid>/schedstat`), ns. */
  running: number;
  waiting: number;
  /** The machine's CPU time, all and idle (the first line of `/proc/stat`), ticks. */
  ticks: number;
  idle: number;
}

/** The figures of `Cores` now, or null where /proc does not have them (not Linux). */
function readCores(): Cores | null {
  try {
    const [running, waiting] = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8')
      .split(' ')
      .map(Number);
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return {
      running: running!,
      waiting: waiting!,
      ticks: cpu.reduce((a, b) => a + b, 0),
      idle: cpu[3]! + cpu[4]!,
    };
  } catch {
    return null;
  }
}

/** What one small-tenant event waited for, from its commit (done) to its claim and its handler. */
interface Waited {
  /** The backlogged tenant's events handled between the commit and the small event's handler. */
  events: number;
  /** The backlogged tenant's claims that came back between the commit and the small event's claim. */
  claims: number;
  /** Rounds that ended between the commit and the small event's claim: it waited for a round's end. */
  rounds: number;
  /** Commit to handler, ms (as the bench times it; secondary: the machine's load moves it). */
  ms: number;
  /** Commit to the small event's claim back (its batchClaimed hook), ms: the rest is its handler's wait. */
  claimMs: number;
  /** Commit to the small event's claim sent, ms: the rest of `claimMs` is the claim's round trip. */
  sentMs: number;
}

/** The relay's counters at a moment: the backlogged tenant's claims and handled events, rounds ended. */
interface Counters {
  claims: number;
  events: number;
  rounds: number;
  at: number;
}

/** The small tenant's events and what each waited for, with `backlog` events of the big tenant due at the start. */
async function run(
  decision: DecisionDatabase,
  policy: Partial<RelayPolicy>,
  backlog: number,
): Promise<{
  waited: Waited[];
  loopDelay: { p99: number; max: number };
  cpuPerEvent: number;
  cpuShare: number;
  /** The event loop's utilization meanwhile (`performance.eventLoopUtilization`), %. */
  loopBusy: number;
  /**
   * Meanwhile, % of the window: the main thread on a core, and runnable but waiting for one (the machine's cores
   * busy); the machine's CPUs idle (with iowait), % of their time. Null off Linux.
   */
  cores: { running: number; waiting: number; idle: number } | null;
  /** `select 1` round trips meanwhile, in this process and in another (see `probeRoundTrips`), ms. */
  probes: { inside: number[]; outside: number[] };
  drained: number;
  perClaim: number;
}> {
  const { db } = decision;
  await db.truncate();
  if (backlog > 0) await db.loadPendingEvents(backlog, BIG);
  await db.vacuumAnalyze();
  const app = await createBenchApp({
    url: db.url,
    consumers: [FairnessConsumer],
    relay: { enabled: true },
    applicationName: 'decision-fairness-delay',
    probe: false,
    policy,
  });
  const consumer = app.context.get(FairnessConsumer);
  consumer.watched.add(SMALL);
  let bigClaims = 0;
  let rounds = 0;
  const counters = (): Counters => ({
    claims: bigClaims,
    events: consumer.count(BIG),
    rounds,
    at: performance.now(),
  });
  const atCommit = new Map<string, Counters>();
  const atClaim = new Map<string, Counters>();
  const atHandler = new Map<string, Counters>();
  app.context.get(OutboxInstrumentation).add({
    roundEnded: () => void rounds++,
    batchClaimed: ({ tenantId, deliveries }) => {
      if (tenantId === BIG) bigClaims++;
      else for (const delivery of deliveries) atClaim.set(delivery.eventId, counters());
    },
  });
  // when each small event's claim was sent (its connection's `claim`, wrapped)
  const sentAt = new Map<string, number>();
  const store = app.context.get<OutboxStorePort>(OUTBOX_STORE_PORT);
  const tenantConnection = store.tenantConnection.bind(store);
  store.tenantConnection = (tenantId) => {
    const connection = tenantConnection(tenantId);
    if (tenantId !== SMALL) return connection;
    const claim = connection.claim.bind(connection);
    connection.claim = async (request) => {
      const at = performance.now();
      const answer = await claim(request);
      for (const d of [...answer.fresh.deliveries, ...answer.due]) sentAt.set(d.eventId, at);
      return answer;
    };
    return connection;
  };
  const handle = consumer.handle.bind(consumer);
  consumer.handle = (event) => {
    if (event.tenantId === SMALL) atHandler.set(event.eventId, counters());
    handle(event);
  };
  try {
    // the counters once the commit is done, where the bench's clock starts (its wake-up has been sent then)
    const produce = async (timed: boolean): Promise<void> => {
      const id = await app.dataSource.transaction((manager) =>
        app.outbox.enqueue(manager, { tenantId: SMALL, eventName: BENCH_EVENT, payload: {} }),
      );
      if (timed) atCommit.set(id, counters());
    };
    for (let i = 0; i < WARM_UP_EVENTS; i++) await Promise.all([produce(false), sleep(1000 / RATE)]);
    // the event loop's delay while the small tenant's events are timed: the longest synchronous stretches
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const cpuBefore = process.cpuUsage();
    const coresBefore = readCores();
    const loopBefore = performance.eventLoopUtilization();
    const bigBefore = consumer.count(BIG);
    const claimsBefore = bigClaims;
    const startedAt = performance.now();
    const probing = probeRoundTrips(db.url, SECONDS);
    const produced: Promise<void>[] = [];
    for (let i = 0; i < RATE * SECONDS && (backlog === 0 || consumer.count(BIG) < backlog * 0.9); i++) {
      produced.push(produce(true));
      await sleep(1000 / RATE);
    }
    await Promise.all(produced);
    const probes = await probing;
    delay.disable();
    const cpu = process.cpuUsage(cpuBefore);
    const coresAfter = readCores();
    const windowNs = (performance.now() - startedAt) * 1e6;
    const cores =
      coresBefore && coresAfter
        ? {
            running: ((coresAfter.running - coresBefore.running) / windowNs) * 100,
            waiting: ((coresAfter.waiting - coresBefore.waiting) / windowNs) * 100,
            idle: ((coresAfter.idle - coresBefore.idle) / (coresAfter.ticks - coresBefore.ticks)) * 100,
          }
        : null;
    const loopBusy = performance.eventLoopUtilization(loopBefore).utilization * 100;
    // this process's CPU (the relay, the producer) per backlogged event handled meanwhile, µs
    const bigHandled = consumer.count(BIG) - bigBefore;
    const cpuPerEvent = bigHandled === 0 ? 0 : (cpu.user + cpu.system) / bigHandled;
    // and of the window's time, % of one core
    const cpuShare = (cpu.user + cpu.system) / 10 / (performance.now() - startedAt);
    // the backlog drained meanwhile, events a second, and events per claim of the backlogged tenant
    const drained = (bigHandled * 1000) / (performance.now() - startedAt);
    const perClaim = bigHandled / Math.max(1, bigClaims - claimsBefore);
    const loopDelay = { p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 };
    await waitUntil(() => [...atCommit.keys()].every((id) => atHandler.has(id)), 30_000);
    // a claim or a handler before the producer's `await` came back counts as none waited for (never below 0)
    const waited = [...atCommit].map(([id, commit]) => {
      const claim = atClaim.get(id)!;
      const handler = atHandler.get(id)!;
      return {
        events: Math.max(0, handler.events - commit.events),
        claims: Math.max(0, claim.claims - commit.claims),
        rounds: Math.max(0, claim.rounds - commit.rounds),
        ms: Math.max(0, handler.at - commit.at),
        claimMs: Math.max(0, claim.at - commit.at),
        sentMs: Math.max(0, sentAt.get(id)! - commit.at),
      };
    });
    return { waited, loopDelay, cpuPerEvent, cpuShare, loopBusy, cores, probes, drained, perClaim };
  } finally {
    await app.close();
  }
}

/** What an event waited for: the backlogged tenant's events handled before it, and a round's end or none. */
function kind(w: Waited): string {
  return `${w.events} events${w.rounds > 0 ? ", a round's end" : ''}`;
}

/** Each count of `values`, in order: "0 ×412, 100 ×180, …". */
function histogram(values: readonly number[]): string {
  const counts = new Map<number, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a - b)
    .map(([value, n]) => `${value} ×${n}`)
    .join(', ');
}

async function main(): Promise<void> {
  const all: Record<string, { policy: Partial<RelayPolicy>; backlog: number }> = {
    'shares on': { policy: {}, backlog: BACKLOG },
    'shares off': { policy: { fairShares: false }, backlog: BACKLOG },
    // the small tenant alone: the denominator of the bench's ratio
    'idle relay': { policy: {}, backlog: 0 },
  };
  // VARIANTS: a comma-separated subset of them (default all)
  const chosen = process.env.VARIANTS?.split(',').map((v) => v.trim()) ?? Object.keys(all);
  const variants: typeof all = Object.fromEntries(
    chosen.map((v) => {
      if (!all[v]) throw new Error(`VARIANTS: no variant "${v}" (${Object.keys(all).join(', ')})`);
      return [v, all[v]];
    }),
  );
  const decision = await openDecisionDatabase();
  heading(
    `The small tenant's wait behind a ${BACKLOG.toLocaleString('en-US')}-event backlog, counted in the backlogged tenant's events, claims and rounds (ADR 1106)`,
    decision.serverVersion,
  );
  print(
    `  the library's defaults (relay.batchSize ${BATCH}); small tenant ${RATE}/s for up to ${SECONDS} s after ${WARM_UP_EVENTS} untimed`,
  );
  try {
    const figures = await inTurns<string, string>(
      Object.keys(variants),
      Number(process.env.TURNS ?? 2),
      async (variant) => {
        const { policy, backlog } = variants[variant]!;
        const { waited, loopDelay, cpuPerEvent, cpuShare, loopBusy, cores, probes, drained, perClaim } =
          await run(decision, policy, backlog);
        const share = (test: (w: Waited) => boolean): number =>
          (waited.filter(test).length / waited.length) * 100;
        const events = waited.map((w) => w.events);
        const ms = waited.map((w) => w.ms);
        const claimMs = waited.map((w) => w.claimMs);
        const sentMs = waited.map((w) => w.sentMs);
        const trip = waited.map((w) => w.claimMs - w.sentMs);
        print(`  ${variant}, ${waited.length} events:`);
        print(`    backlogged tenant's events handled, commit → handler: ${histogram(events)}`);
        print(`    its claims, commit → small claim: ${histogram(waited.map((w) => w.claims))}`);
        print(`    rounds ended, commit → small claim: ${histogram(waited.map((w) => w.rounds))}`);
        print(
          `    commit → handler: p50 ${percentile(ms, 50)!.toFixed(1)} ms, p99 ${percentile(ms, 99)!.toFixed(1)} ms; commit → claim back p50 ${percentile(claimMs, 50)!.toFixed(1)} ms, p99 ${percentile(claimMs, 99)!.toFixed(1)} ms`,
        );
        print(
          `    commit → claim sent p50 ${percentile(sentMs, 50)!.toFixed(1)} ms, p99 ${percentile(sentMs, 99)!.toFixed(1)} ms; its round trip p50 ${percentile(trip, 50)!.toFixed(1)} ms, p99 ${percentile(trip, 99)!.toFixed(1)} ms`,
        );
        print(
          `    event loop delay meanwhile: p99 ${loopDelay.p99.toFixed(1)} ms, max ${loopDelay.max.toFixed(1)} ms; event loop busy ${loopBusy.toFixed(0)} %; Node CPU ${cpuShare.toFixed(0)} % of a core, ${cpuPerEvent.toFixed(1)} µs per backlogged event; backlog drained ${drained.toFixed(0)}/s, ${perClaim.toFixed(1)} events a claim`,
        );
        // the loop's busy time split: its thread on a core, or waiting for one (ADR 1106, addendum of 2026-12-07, last)
        if (cores)
          print(
            `    main thread on a core ${cores.running.toFixed(0)} % of the window, runnable and waiting for one ${cores.waiting.toFixed(0)} %; the machine's CPUs idle ${cores.idle.toFixed(0)} %`,
          );
        // which waits the slowest 1 % had, and what each kind of wait takes
        const { inside, outside } = probes;
        print(
          `    select 1 meanwhile: in this process p50 ${percentile(inside, 50)!.toFixed(2)} ms, p99 ${percentile(inside, 99)!.toFixed(2)} ms; in another p50 ${percentile(outside, 50)!.toFixed(2)} ms, p99 ${percentile(outside, 99)!.toFixed(2)} ms`,
        );
        const slowest = [...waited].sort((a, b) => b.ms - a.ms).slice(0, Math.ceil(waited.length / 100));
        print(`    the slowest 1 %: ${slowest.map((w) => `${w.ms.toFixed(1)} ms (${kind(w)})`).join(', ')}`);
        const kinds = new Map<string, number[]>();
        for (const w of waited) kinds.set(kind(w), [...(kinds.get(kind(w)) ?? []), w.ms]);
        for (const [name, values] of [...kinds].sort())
          print(
            `      ${name}: ${values.length} events, p50 ${percentile(values, 50)!.toFixed(1)} ms, p99 ${percentile(values, 99)!.toFixed(1)} ms`,
          );
        return {
          "backlogged tenant's events before the handler, p99": percentile(events, 99)!,
          'events behind more than one batch, %': share((w) => w.events > BATCH),
          "events that waited for a round's end, %": share((w) => w.rounds > 0),
          'commit → handler p99, ms': percentile(ms, 99)!,
          'commit → claim sent p99, ms': percentile(sentMs, 99)!,
          'claim round trip p99, ms': percentile(trip, 99)!,
          'event loop delay p99, ms': loopDelay.p99,
          'Node CPU, % of a core': cpuShare,
          'event loop busy, %': loopBusy,
          'main thread waiting for a core, % of the window': cores?.waiting ?? NaN,
          "the machine's CPUs idle, %": cores?.idle ?? NaN,
          'select 1 p50 in this process, ms': percentile(probes.inside, 50)!,
          'select 1 p50 in another process, ms': percentile(probes.outside, 50)!,
          'select 1 p99 in this process, ms': percentile(probes.inside, 99)!,
          'select 1 p99 in another process, ms': percentile(probes.outside, 99)!,
          'backlog drained meanwhile, events/s': drained,
        };
      },
    );
    print('  each run, in turns:');
    for (const [figure, runs] of figures)
      print(
        `    ${figure.padEnd(56)} ${[...runs].map(([v, values]) => `${v} ${values.map((x) => x.toFixed(1)).join(' / ')}`).join('; ')}`,
      );
  } finally {
    await decision.close();
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
