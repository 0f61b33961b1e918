/**
 * 7. Peers. The library beside graphile-worker, pg-boss and pg-transactional-outbox on the same work, the same
 * server and the same run, taking turns: enqueue in a business transaction (1 and 8 connections, with the raw
 * INSERT as a reference), draining a backlog with two no-op consumers and with one consumer writing a row, and
 * commit → handler latency at a fixed rate (with the raw NOTIFY-woken relay's p99 as the reference). Each peer
 * runs with the settings its docs recommend for throughput and latency (printed), the library with its defaults.
 * Every line prints library / peer and flags the peers that lead; server CPU and statements per event say where
 * the cost lies. The peers' tuning and adapters are in `bench/peers/`, the report lines in
 * `harness/peers-report.ts`; the file is over 350 lines because its three measurements share one set-up.
 */
import { join } from 'node:path';
import { Pool } from 'pg';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { cpuSpentMs, readBackendCpu } from '../harness/backend-cpu';
import { BENCH_TENANT } from '../harness/bench-database';
import { CONSUMER_NAMES, type ConsumerVariant } from '../harness/bench-consumers';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import {
  drive,
  libraryTransactor,
  peerEvent,
  peerTransactor,
  rawEventInsert,
  typeormTransactor,
  type Transactor,
} from '../harness/enqueue-transactors';
import {
  measureLibrary,
  measureRaw,
  pooled,
  produceSteadily,
  summarize,
  warmUp,
  type LatencyRun,
  type Produce,
} from '../harness/latency-runs';
import {
  bestPeer,
  range,
  reportCosts,
  reportRates,
  summarizeSamples,
  type Sample,
  type System,
} from '../harness/peers-report';
import { RELAY_POLICY_ENV } from '../harness/bench-app';
import { runRelayWorkers } from '../harness/relay-workers';
import { StatementStats, type StatementReading } from '../harness/statement-stats';
import { inTurn, now, waitUntil } from '../harness/stats';
import { insertContact } from '../raw/raw.queries';
import type { RelayWorkerConfig } from '../workers/relay-worker.protocol';
import { LATENCY_CONSUMER, type Peer } from '../peers/peer';
import type { PeerWorkerConfig } from '../peers/peer-worker';
import { PEERS, peerNamed } from '../peers/peers';

const ENQUEUE_SLICE_MS = 250;
const WARM_UP_MS = 300;
const CONNECTIONS = [1, 8] as const;
/** A drain that takes longer has stalled (the slowest peer drains the full backlog in well under a minute). */
const DRAIN_TIMEOUT_MS = 5 * 60_000;
const PEER_WORKER_FILE = join(__dirname, '..', 'peers', 'peer-worker.js');

function applicationName(system: System): string {
  return `bench-peers-${system}`;
}

/** A fresh start for every system's tables: the bench's own and each peer's. */
async function resetAll(context: BenchContext): Promise<void> {
  await context.db.truncate();
  for (const peer of PEERS) await peer.reset(context.db);
  await context.db.checkpoint();
}

/**
 * Every system gets the same business transaction: TypeORM's `transaction()` on a pool of the bench app's
 * size, a contact inserted through its manager, then the event added — by `enqueue` (the library, its defaults),
 * by a hand-written INSERT of the same row (raw), or by the peer's own call on the transaction's `pg` client.
 * Neither TypeORM's nor a bare `pg` client's cost is then counted for one system and not the others.
 */
function openEnqueuer(context: BenchContext, system: System, connections: number): Promise<Transactor> {
  const { url } = context.db;
  const name = applicationName(system);
  if (system === 'library')
    return libraryTransactor(
      url,
      connections,
      { side: 'library', business: true, withEvent: true },
      name,
      false,
    );
  if (system === 'raw')
    return typeormTransactor(url, connections, name, async (manager) => {
      const insert = rawEventInsert();
      await manager.query(insert.text, insert.values);
    });
  return peerTransactor(url, connections, peerNamed(system), name);
}

/** Per system, one sample per round: all systems open at once, taking turns in short slices. */
async function measureEnqueue(
  context: BenchContext,
  stats: StatementStats,
  systems: readonly System[],
  connections: number,
): Promise<Map<System, Sample[]>> {
  const { db, options } = context;
  const samples = new Map<System, Sample[]>(systems.map((s) => [s, []]));
  const transactors = new Map<System, Transactor>();
  try {
    for (const system of systems) transactors.set(system, await openEnqueuer(context, system, connections));
    const turns = Math.max(1, Math.round((options.sizes.peersEnqueueSeconds * 1000) / ENQUEUE_SLICE_MS));
    for (let round = 0; round < options.sizes.peersRounds; round++) {
      await resetAll(context);
      for (const transactor of transactors.values()) await drive(transactor, connections, WARM_UP_MS);
      const totals = new Map(
        systems.map((s) => [s, { commits: 0, ms: 0, cpuMs: 0, calls: 0, top: new Map() }]),
      );
      for (let turn = 0; turn < turns; turn++) {
        for (const system of inTurn(systems, turn + round)) {
          const names = [applicationName(system)];
          const cpuBefore = await readBackendCpu(db.sql.bind(db), names);
          await stats.reset();
          const slice = await drive(transactors.get(system)!, connections, ENQUEUE_SLICE_MS);
          const reading = await stats.read(5);
          const cpu = cpuSpentMs(cpuBefore, await readBackendCpu(db.sql.bind(db), names));
          const total = totals.get(system)!;
          total.commits += slice.commits;
          total.ms += slice.ms;
          total.cpuMs += cpu ?? Number.NaN;
          total.calls += reading?.calls ?? Number.NaN;
          for (const cost of reading?.top ?? []) addCost(total.top, cost);
        }
      }
      for (const [system, t] of totals) {
        samples.get(system)!.push({
          rate: (t.commits / t.ms) * 1000,
          serverCpuUs: (t.cpuMs * 1000) / t.commits,
          statements: t.calls / t.commits,
          top: topCosts(t.top, t.commits),
        });
      }
    }
  } finally {
    await Promise.all([...transactors.values()].map((t) => t.close()));
  }
  return samples;
}

type CostMap = Map<string, { calls: number; execMs: number }>;

function addCost(map: CostMap, cost: StatementReading['top'][number]): void {
  const seen = map.get(cost.query) ?? { calls: 0, execMs: 0 };
  map.set(cost.query, { calls: seen.calls + cost.calls, execMs: seen.execMs + cost.execMs });
}

/** The three costliest statements, per unit of work. */
function topCosts(map: CostMap, units: number): StatementReading['top'] {
  return [...map]
    .sort((a, b) => b[1].execMs - a[1].execMs)
    .slice(0, 3)
    .map(([query, c]) => ({ query, calls: c.calls / units, execMs: c.execMs / units }));
}

function drainBacklog(backlog: number, system: System): number {
  const cap = system === 'library' || system === 'raw' ? undefined : peerNamed(system).maxDrainBacklog;
  return Math.min(backlog, cap ?? backlog);
}

/** One drain of a fresh backlog by one system in a child process; checks every event was settled. */
async function drainOnce(
  context: BenchContext,
  stats: StatementStats,
  system: System,
  variant: ConsumerVariant,
): Promise<Sample> {
  const { db, options, report } = context;
  const backlog = drainBacklog(options.sizes.peersBacklog, system);
  const consumers = CONSUMER_NAMES[variant];
  let outcome;
  if (system === 'library') {
    await resetAll(context);
    await db.loadPendingEvents(backlog);
    await db.sql('analyze');
    const config: RelayWorkerConfig = {
      url: db.url,
      kind: 'library',
      variant,
      batchSize: OUTBOX_DEFAULTS.relay.batchSize,
      expectedEvents: backlog,
      sampleMemory: false,
    };
    outcome = await runRelayWorkers([config], DRAIN_TIMEOUT_MS, { beforeGo: () => stats.reset() });
  } else {
    const peer = peerNamed(system as Peer['name']);
    await resetAll(context);
    await peer.loadBacklog(db, backlog, consumers);
    await db.sql('analyze');
    const config: PeerWorkerConfig = {
      url: db.url,
      kind: peer.name,
      variant,
      expectedEvents: backlog,
      sampleMemory: false,
    };
    outcome = await runRelayWorkers([config], DRAIN_TIMEOUT_MS, {
      workerFile: PEER_WORKER_FILE,
      beforeGo: () => stats.reset(),
    });
  }
  const reading = await stats.read();
  await checkDrained(context, system, variant, backlog);
  const result = outcome.results[0]!;
  if (result.events !== backlog)
    report.note(`WARNING ${system}: drained ${result.events} of ${backlog} events`);
  if (system === 'library')
    report.note(
      `library (${variant}): Node ${((result.cpu.nodeMs * 1000) / backlog).toFixed(1)} µs CPU per event, ` +
        `PostgreSQL ${result.cpu.postgresMs === null ? '?' : ((result.cpu.postgresMs * 1000) / backlog).toFixed(1)} µs`,
    );
  return {
    rate: (backlog / result.elapsedMs) * 1000,
    serverCpuUs: result.cpu.postgresMs === null ? Number.NaN : (result.cpu.postgresMs * 1000) / backlog,
    statements: reading ? reading.calls / backlog : Number.NaN,
    top: (reading?.top ?? []).map((c) => ({ ...c, calls: c.calls / backlog, execMs: c.execMs / backlog })),
  };
}

/** A drain that failed or stalled: said in the report, counted as no rate, and the run goes on. */
function failedDrain(context: BenchContext, system: System): (error: unknown) => Sample {
  return (error) => {
    context.report.note(
      `WARNING ${system}: drain failed: ${error instanceof Error ? error.message : String(error)}`,
    );
    return { rate: Number.NaN, serverCpuUs: Number.NaN, statements: Number.NaN, top: [] };
  };
}

/** Every event settled, and with the writing consumer, one effect row each. */
async function checkDrained(
  context: BenchContext,
  system: System,
  variant: ConsumerVariant,
  backlog: number,
): Promise<void> {
  const { db, report } = context;
  const counts = await db.counts();
  const unsettled =
    system === 'library'
      ? counts.unsettled
      : await peerNamed(system as Peer['name']).unsettled((t) => db.sql(t));
  const note =
    system === 'library' ? null : await peerNamed(system as Peer['name']).drainNote?.((t) => db.sql(t));
  if (note) report.note(`${system} (${variant}): ${note}`);
  const expectedEffects = variant === 'db-write' ? backlog : 0;
  if (unsettled !== 0 || counts.effects !== expectedEffects) {
    report.note(
      `WARNING ${system} (${variant}) left ${unsettled} unsettled and ${counts.effects} effect rows ` +
        `(expected 0 and ${expectedEffects})`,
    );
  }
}

/** A peer's latency run in this process, as the library's: a producer pool and the consumers side by side. */
async function measurePeerLatency(context: BenchContext, peer: Peer): Promise<LatencyRun> {
  const { db, options } = context;
  await resetAll(context);
  const name = applicationName(peer.name);
  const handledAt = new Map<string, number>();
  const committedAt = new Map<string, number>();
  const consumers = await peer.startConsumers({
    url: db.url,
    consumers: [LATENCY_CONSUMER],
    applicationName: name,
    onHandled: (eventId) => {
      if (!handledAt.has(eventId)) handledAt.set(eventId, now());
    },
  });
  const producer = await peer.openProducer(db.url, `${name}-producer`);
  const pool = new Pool({ connectionString: db.url, max: 10, application_name: `${name}-producer` });
  try {
    const produce: Produce = async () => {
      const event = peerEvent();
      const client = await pool.connect();
      try {
        await client.query('begin');
        const contact = insertContact(event.contactId, BENCH_TENANT, event.name, event.email);
        await client.query(contact.text, contact.values);
        await producer.enqueue(client, event, [LATENCY_CONSUMER]);
        await client.query('commit');
      } finally {
        client.release();
      }
      committedAt.set(event.eventId, now());
    };
    const rate = options.sizes.peersLatencyRate;
    await warmUp(rate, produce, committedAt, handledAt);
    const { produced, elapsedMs } = await produceSteadily(rate, options.sizes.peersLatencySeconds, produce);
    await waitUntil(() => handledAt.size >= produced, 10_000);
    return summarize(committedAt, handledAt, produced, elapsedMs);
  } finally {
    await consumers.stop();
    await producer.close();
    await pool.end();
  }
}

/** The latency scenario's runs at this scenario's rate and length. */
function atPeersRate(context: BenchContext): BenchContext {
  const { sizes } = context.options;
  return {
    ...context,
    options: {
      ...context.options,
      sizes: { ...sizes, latencyRate: sizes.peersLatencyRate, latencySeconds: sizes.peersLatencySeconds },
    },
  };
}

// --- the scenario ------------------------------------------------------------------------------------------

async function enqueueLines(context: BenchContext, stats: StatementStats): Promise<void> {
  const systems: System[] = ['raw', 'library', ...PEERS.map((p) => p.name)];
  for (const connections of CONNECTIONS) {
    const samples = await measureEnqueue(context, stats, systems, connections);
    const summaries = new Map([...samples].map(([system, s]) => [system, summarizeSamples(s)]));
    const line = `enqueue, business tx + event, ${connections} conn, commits/s`;
    reportRates(context, line, '/s', summaries, { target: 1, againstBest: true });
    const library = summaries.get('library')!;
    const raw = summaries.get('raw')!;
    context.report.add({
      scenario: 'peers',
      label: `${line}: library vs raw INSERT`,
      value: library.median,
      unit: '/s',
      versus: { label: 'raw', value: raw.median },
      goal: { on: 'ratio', op: '>=', target: 0.9 },
      note: `rounds: library ${range(library, '/s')}, raw ${range(raw, '/s')}`,
    });
    reportCosts(context, summaries, { name: 'commit', scale: 1 }, ['library', 'raw', bestPeer(summaries)]);
  }
}

async function drainLines(context: BenchContext, stats: StatementStats): Promise<void> {
  const { options } = context;
  const systems: System[] = ['library', ...PEERS.map((p) => p.name)];
  for (const variant of ['no-db', 'db-write'] as const) {
    const samples = new Map<System, Sample[]>(systems.map((s) => [s, []]));
    for (let round = 0; round < options.sizes.peersRounds; round++) {
      for (const system of inTurn(systems, round))
        samples
          .get(system)!
          .push(await drainOnce(context, stats, system, variant).catch(failedDrain(context, system)));
    }
    const summaries = new Map([...samples].map(([system, s]) => [system, summarizeSamples(s)]));
    const goalPeer: System = variant === 'no-db' ? 'graphile-worker' : 'pg-boss';
    const line =
      variant === 'no-db'
        ? `drain ${options.sizes.peersBacklog.toLocaleString('en-US')} events × 2 no-op consumers, events/s`
        : `drain, one consumer writes a row, events/s`;
    reportRates(context, line, '/s', summaries, { peer: goalPeer, target: 1 });
    for (const peer of PEERS) {
      const backlog = drainBacklog(options.sizes.peersBacklog, peer.name);
      if (backlog < options.sizes.peersBacklog)
        context.report.note(
          `${peer.name} drained ${backlog.toLocaleString('en-US')} events per run (its maxDrainBacklog)`,
        );
    }
    if (variant === 'db-write') {
      const atomic = PEERS.map((p) => `${p.name} ${p.writesAtomically ? 'atomic' : 'NOT atomic'}`).join(', ');
      context.report.note(`the row and its done mark: library atomic (context.manager), ${atomic}`);
    }
    reportCosts(context, summaries, { name: '100 events', scale: 100 }, ['library', goalPeer]);
  }
}

async function latencyLines(context: BenchContext): Promise<void> {
  const { options, report } = context;
  const scaled = atPeersRate(context);
  const runs = new Map<System, LatencyRun[]>();
  const measure: Record<System, () => Promise<LatencyRun>> = {
    raw: () => measureRaw(scaled),
    // without the bench's query probe, as the raw relay and the peers run
    library: () => measureLibrary(scaled, 'automatic', { probe: false }),
    'graphile-worker': () => measurePeerLatency(context, peerNamed('graphile-worker')),
    'pg-boss': () => measurePeerLatency(context, peerNamed('pg-boss')),
    'pg-transactional-outbox': () => measurePeerLatency(context, peerNamed('pg-transactional-outbox')),
  };
  const order = Object.keys(measure) as System[];
  for (let round = 0; round < options.sizes.peersRounds; round++) {
    for (const system of inTurn(order, round)) {
      await resetAll(context);
      runs.set(system, [...(runs.get(system) ?? []), await measure[system]()]);
    }
  }
  const pooledRuns = new Map([...runs].map(([system, r]) => [system, pooled(r)]));
  const library = pooledRuns.get('library')!;
  const raw = pooledRuns.get('raw')!;
  const range = (system: System, figure: 'p50' | 'p99'): string => {
    const values = runs.get(system)!.map((r) => r[figure]);
    return `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)} ms`;
  };
  const p50Range = (system: System): string => range(system, 'p50');
  report.note(
    `${options.sizes.peersLatencyRate}/s for ${options.sizes.peersLatencySeconds} s after a 1 s warm-up, ` +
      `${options.sizes.peersRounds} round(s) in turns, events pooled; producer and consumers in this process; ` +
      'one consumer per event (library: LatencyConsumer in its default app, without the query probe of the bench; ' +
      'peers: a job/message for one consumer)',
  );
  for (const peer of PEERS) {
    const run = pooledRuns.get(peer.name)!;
    report.add({
      scenario: 'peers',
      label: `latency p50: library vs ${peer.name}`,
      value: library.p50,
      unit: 'ms',
      versus: { label: peer.name, value: run.p50 },
      goal: peer.name === 'graphile-worker' ? { on: 'ratio', op: '<=', target: 1 } : undefined,
      note:
        `${run.p50 < library.p50 ? `PEER LEADS: ${peer.name} p50 ${(library.p50 / run.p50).toFixed(2)}× lower; ` : ''}` +
        `per-round p50: library ${p50Range('library')}, ${peer.name} ${p50Range(peer.name)}; ` +
        `p99 ${library.p99.toFixed(1)} vs ${run.p99.toFixed(1)} ms` +
        (run.missing > 0 ? `; WARNING ${run.missing} of ${run.produced} never handled` : ''),
    });
  }
  report.add({
    scenario: 'peers',
    label: 'latency p99: library vs raw NOTIFY relay',
    value: library.p99,
    unit: 'ms',
    versus: { label: 'raw', value: raw.p99 },
    goal: { on: 'ratio', op: '<=', target: 1.5 },
    note:
      `per-round p99: library ${range('library', 'p99')}, raw ${range('raw', 'p99')}; ` +
      `p50 library ${library.p50.toFixed(2)} ms, raw ${raw.p50.toFixed(2)} ms (per round ${p50Range('raw')})`,
  });
}

export const peersScenario: BenchScenario = {
  name: 'peers',
  title:
    'Peers: graphile-worker, pg-boss, pg-transactional-outbox on the same work (goals: enqueue ≥ 1.0× the best ' +
    'peer and ≥ 0.90× raw; drain ≥ 1.0× graphile-worker; writing drain ≥ 1.0× pg-boss; p50 ≤ graphile-worker; ' +
    'p99 ≤ 1.5× raw relay)',
  async run(context) {
    const { db, report, options } = context;
    for (const peer of PEERS) {
      await peer.uninstall(db);
      await peer.install(db);
      report.note(`${peer.name} ${peer.version}: ${peer.settings}; fan-out: ${peer.fanOut}`);
    }
    report.note(
      `library: defaults (OutboxModule.forRoot, batch ${OUTBOX_DEFAULTS.relay.batchSize}, growing to ` +
        `${OUTBOX_DEFAULTS.relay.maxBatchSize} while handlers write nothing, ` +
        `concurrency ${OUTBOX_DEFAULTS.relay.concurrency}: 2 batches at once on its pool of 10); ` +
        `each system in its own schema of ${db.name}; ${options.sizes.peersRounds} round(s) per line, ` +
        'systems in turns (forward, then backward); medians, ranges over rounds',
    );
    const switches = process.env[RELAY_POLICY_ENV]?.trim();
    if (switches) report.note(`library: relay policy switched by ${RELAY_POLICY_ENV}: ${switches}`);
    const stats = await StatementStats.enable(db);
    if (!stats.available) report.note(`statement counts unavailable: ${stats.reason}`);
    try {
      await enqueueLines(context, stats);
      await drainLines(context, stats);
      await latencyLines(context);
    } finally {
      await stats.disable();
      for (const peer of PEERS) await peer.uninstall(db);
    }
  },
};
