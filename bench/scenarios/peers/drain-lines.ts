/**
 * The peers scenario's drain lines: a fresh backlog drained by each system in a child process (two no-op
 * consumers, one consumer writing a row, each consumer writing one), systems in turns; events/s, and CPU per
 * 1,000 events as the worker process and its PostgreSQL backends report it (`workers/relay-worker.protocol.ts`).
 */
import { join } from 'node:path';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { CONSUMER_NAMES, expectedEffects, type ConsumerVariant } from '../../harness/bench-consumers';
import {
  range,
  reportCpu,
  reportRates,
  reportStatements,
  summarizeSamples,
  type CpuGoal,
  type Sample,
  type System,
} from '../../harness/peers-report';
import { runRelayWorkers } from '../../harness/relay-workers';
import { inTurn } from '../../harness/stats';
import type { Peer } from '../../peers/peer';
import type { PeerWorkerConfig } from '../../peers/peer-worker';
import { PEERS, peerNamed } from '../../peers/peers';
import type { RelayWorkerConfig } from '../../workers/relay-worker.protocol';
import { resetAll, type PeersRun } from './peers-run';

/** A drain that takes longer has stalled (the slowest peer drains the full backlog in well under a minute). */
const DRAIN_TIMEOUT_MS = 5 * 60_000;
const PEER_WORKER_FILE = join(__dirname, '..', '..', 'peers', 'peer-worker.js');

/** Per variant: its rate line, the peer its rate goal names, and what its CPU is compared with. */
const VARIANTS: Record<ConsumerVariant, { line: string; ratePeer: System; cpu: CpuGoal[] }> = {
  'no-db': {
    line: 'drain, two no-op consumers',
    ratePeer: 'graphile-worker',
    cpu: [{ versus: 'graphile-worker', target: 1 }, { versus: 'raw' }],
  },
  'db-write': {
    line: 'drain, one consumer writes a row',
    ratePeer: 'pg-boss',
    cpu: [{ versus: 'pg-boss' }, { versus: 'raw' }],
  },
  'db-write-all': {
    line: 'drain, each consumer writes a row',
    ratePeer: 'pg-boss',
    cpu: [
      { versus: 'pg-boss', target: 1 },
      { versus: 'raw', target: 1.5 },
    ],
  },
};

function isPeer(system: System): system is Peer['name'] {
  return system !== 'library' && system !== 'raw';
}

function drainBacklog(backlog: number, system: System): number {
  const cap = isPeer(system) ? peerNamed(system).maxDrainBacklog : undefined;
  return Math.min(backlog, cap ?? backlog);
}

/** One drain of a fresh backlog by one system in a child process; checks every event was settled. */
async function drainOnce(run: PeersRun, system: System, variant: ConsumerVariant): Promise<Sample> {
  const { context, stats } = run;
  const { db, options, report } = context;
  const backlog = drainBacklog(options.sizes.peersBacklog, system);
  await resetAll(context);
  let outcome;
  if (isPeer(system)) {
    const peer = peerNamed(system);
    await peer.loadBacklog(db, backlog, CONSUMER_NAMES[variant]);
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
  } else {
    // the library's relay.drain(), or the raw batched relay at the library's batch size, on the same tables
    await db.loadPendingEvents(backlog);
    await db.sql('analyze');
    const config: RelayWorkerConfig = {
      url: db.url,
      kind: system === 'library' ? 'library' : 'raw-batched',
      variant,
      batchSize: OUTBOX_DEFAULTS.relay.batchSize,
      expectedEvents: backlog,
      sampleMemory: false,
    };
    outcome = await runRelayWorkers([config], DRAIN_TIMEOUT_MS, { beforeGo: () => stats.reset() });
  }
  const reading = await stats.read();
  await checkDrained(run, system, variant, backlog);
  const result = outcome.results[0]!;
  if (result.events !== backlog)
    report.note(`WARNING ${system}: drained ${result.events} of ${backlog} events`);
  return {
    rate: (backlog / result.elapsedMs) * 1000,
    nodeCpuUs: (result.cpu.nodeMs * 1000) / backlog,
    serverCpuUs: result.cpu.postgresMs === null ? Number.NaN : (result.cpu.postgresMs * 1000) / backlog,
    statements: reading ? reading.calls / backlog : Number.NaN,
    top: (reading?.top ?? []).map((c) => ({ ...c, calls: c.calls / backlog, execMs: c.execMs / backlog })),
  };
}

/** A drain that failed or stalled: said in the report, counted as no rate, and the run goes on. */
function failedDrain(run: PeersRun, system: System): (error: unknown) => Sample {
  return (error) => {
    run.context.report.note(
      `WARNING ${system}: drain failed: ${error instanceof Error ? error.message : String(error)}`,
    );
    return { rate: NaN, nodeCpuUs: NaN, serverCpuUs: NaN, statements: NaN, top: [] };
  };
}

/** Every event settled, and one effect row per event and writing consumer. */
async function checkDrained(
  run: PeersRun,
  system: System,
  variant: ConsumerVariant,
  backlog: number,
): Promise<void> {
  const { db, report } = run.context;
  const counts = await db.counts();
  const query = (text: string): Promise<{ n: number }[]> => db.sql(text);
  const unsettled = isPeer(system) ? await peerNamed(system).unsettled(query) : counts.unsettled;
  const note = isPeer(system) ? await peerNamed(system).drainNote?.(query) : null;
  if (note) report.note(`${system} (${variant}): ${note}`);
  const effects = expectedEffects(variant, backlog);
  if (unsettled !== 0 || counts.effects !== effects) {
    report.note(
      `WARNING ${system} (${variant}) left ${unsettled} unsettled and ${counts.effects} effect rows ` +
        `(expected 0 and ${effects})`,
    );
  }
}

export async function drainLines(run: PeersRun): Promise<void> {
  const { context, tag } = run;
  const { options, report } = context;
  const systems: System[] = ['library', 'raw', ...PEERS.map((p) => p.name)];
  report.note(
    `drains of ${options.sizes.peersBacklog.toLocaleString('en-US')} events × 2 consumers, each system in a ` +
      'child process (raw: the batched relay, one pg connection); CPU: that process and its backends, ' +
      'from go to the last done mark (peers: from go, their consumers start after it)',
  );
  for (const variant of Object.keys(VARIANTS) as ConsumerVariant[]) {
    const samples = new Map<System, Sample[]>(systems.map((s) => [s, []]));
    for (let round = 0; round < options.sizes.peersRounds; round++) {
      for (const system of inTurn(systems, round))
        samples.get(system)!.push(await drainOnce(run, system, variant).catch(failedDrain(run, system)));
    }
    const summaries = new Map([...samples].map(([system, s]) => [system, summarizeSamples(s)]));
    const { line, ratePeer, cpu } = VARIANTS[variant];
    reportRates(context, `${line}, events/s${tag}`, '/s', summaries, { peer: ratePeer, target: 1 });
    const library = summaries.get('library')!;
    const raw = summaries.get('raw')!;
    report.add({
      scenario: 'peers',
      label: `${line}, events/s${tag}: library vs raw relay`,
      value: library.median,
      unit: '/s',
      versus: { label: 'raw', value: raw.median },
      note: `rounds: library ${range(library, '/s')}, raw ${range(raw, '/s')}`,
    });
    for (const peer of PEERS) {
      const backlog = drainBacklog(options.sizes.peersBacklog, peer.name);
      if (backlog < options.sizes.peersBacklog)
        report.note(
          `${peer.name} drained ${backlog.toLocaleString('en-US')} events per run (its maxDrainBacklog)`,
        );
    }
    if (variant !== 'no-db') {
      const atomic = PEERS.map((p) => `${p.name} ${p.writesAtomically ? 'atomic' : 'NOT atomic'}`).join(', ');
      report.note(`the rows and their done mark: library and raw atomic, ${atomic}`);
    }
    reportCpu(context, `${line}${tag}`, summaries, { per: 'ms per 1,000 events', unit: 'ms' }, cpu);
    reportStatements(context, summaries, { name: '100 events', scale: 100 }, ['library', ratePeer]);
  }
}
