/**
 * The peers scenario's enqueue lines: a business transaction plus its event, at 1 and 8 connections, every
 * system open at once and taking turns in short slices; commits/s, and CPU per commit from this process's
 * `process.cpuUsage()` and the system's PostgreSQL backends over each of its slices. The library's Node CPU
 * beyond the hand-written insert's is read in pairs: the two run back to back in every turn.
 */
import { cpuSpentMs, readBackendCpu } from '../../harness/backend-cpu';
import {
  drive,
  libraryTransactor,
  peerTransactor,
  rawEventInsert,
  typeormTransactor,
} from '../../harness/enqueue-transactors';
import type { Transactor } from '../../harness/enqueue-transactors';
import {
  bestPeer,
  range,
  reportCpu,
  reportRates,
  reportStatements,
  summarizeSamples,
  type Sample,
  type System,
} from '../../harness/peers-report';
import { formatValue } from '../../harness/report';
import type { StatementReading } from '../../harness/statement-stats';
import { inTurn, pairedDifference } from '../../harness/stats';
import { PEERS, peerNamed } from '../../peers/peers';
import { applicationName, resetAll, type PeersRun } from './peers-run';

const ENQUEUE_SLICE_MS = 250;
const WARM_UP_MS = 300;
const CONNECTIONS = [1, 8] as const;
/** The bound on the library's own Node CPU per enqueue beyond the hand-written insert's. */
const NODE_CPU_MARGIN_US = 30;

/**
 * Every system gets the same business transaction: TypeORM's `transaction()` on a pool of the bench app's
 * size, a contact inserted through its manager, then the event added — by `enqueue` (the library, its defaults),
 * by a hand-written INSERT of the same row (raw), or by the peer's own call on the transaction's `pg` client.
 * Neither TypeORM's nor a bare `pg` client's cost is then counted for one system and not the others.
 */
function openEnqueuer(url: string, system: System, connections: number, keyed: boolean): Promise<Transactor> {
  const name = applicationName(system);
  if (system === 'library')
    return libraryTransactor(
      url,
      connections,
      { side: 'library', business: true, withEvent: true, keyed },
      name,
      false,
    );
  if (system === 'raw')
    return typeormTransactor(url, connections, name, async (manager) => {
      const insert = rawEventInsert();
      await manager.query(insert.text, insert.values);
    });
  return peerTransactor(url, connections, peerNamed(system), name, keyed);
}

interface Totals {
  commits: number;
  ms: number;
  nodeUs: number;
  serverMs: number;
  calls: number;
  top: CostMap;
}

/** Per system, one sample per round, and its Node CPU µs per commit of every slice (one per turn, rounds in order). */
interface Enqueued {
  samples: Map<System, Sample[]>;
  sliceNodeUs: Map<System, number[]>;
}

/** All systems open at once, taking turns in short slices. */
async function measureEnqueue(
  run: PeersRun,
  systems: readonly System[],
  connections: number,
  keyed = false,
): Promise<Enqueued> {
  const { context, stats } = run;
  const { db, options } = context;
  const query = db.sql.bind(db);
  const samples = new Map<System, Sample[]>(systems.map((s) => [s, []]));
  const sliceNodeUs = new Map<System, number[]>(systems.map((s) => [s, []]));
  const transactors = new Map<System, Transactor>();
  try {
    for (const system of systems)
      transactors.set(system, await openEnqueuer(db.url, system, connections, keyed));
    const turns = Math.max(1, Math.round((options.sizes.peersEnqueueSeconds * 1000) / ENQUEUE_SLICE_MS));
    for (let round = 0; round < options.sizes.peersRounds; round++) {
      await resetAll(context);
      for (const transactor of transactors.values()) await drive(transactor, connections, WARM_UP_MS);
      const totals = new Map<System, Totals>(
        systems.map((s) => [s, { commits: 0, ms: 0, nodeUs: 0, serverMs: 0, calls: 0, top: new Map() }]),
      );
      for (let turn = 0; turn < turns; turn++) {
        for (const system of inTurn(systems, turn + round)) {
          const names = [applicationName(system)];
          const cpuBefore = await readBackendCpu(query, names);
          await stats.reset();
          const slice = await drive(transactors.get(system)!, connections, ENQUEUE_SLICE_MS);
          const reading = await stats.read(5);
          const cpu = cpuSpentMs(cpuBefore, await readBackendCpu(query, names));
          sliceNodeUs.get(system)!.push(slice.cpuUs / slice.commits);
          const total = totals.get(system)!;
          total.commits += slice.commits;
          total.ms += slice.ms;
          total.nodeUs += slice.cpuUs;
          total.serverMs += cpu ?? Number.NaN;
          total.calls += reading?.calls ?? Number.NaN;
          for (const cost of reading?.top ?? []) addCost(total.top, cost);
        }
      }
      for (const [system, t] of totals) {
        samples.get(system)!.push({
          rate: (t.commits / t.ms) * 1000,
          nodeCpuUs: t.nodeUs / t.commits,
          serverCpuUs: (t.serverMs * 1000) / t.commits,
          statements: t.calls / t.commits,
          top: topCosts(t.top, t.commits),
        });
      }
    }
  } finally {
    await Promise.all([...transactors.values()].map((t) => t.close()));
  }
  return { samples, sliceNodeUs };
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

export async function enqueueLines(run: PeersRun): Promise<void> {
  const { context, tag } = run;
  const systems: System[] = ['raw', 'library', ...PEERS.map((p) => p.name)];
  for (const connections of CONNECTIONS) {
    const { samples, sliceNodeUs } = await measureEnqueue(run, systems, connections);
    const summaries = new Map([...samples].map(([system, s]) => [system, summarizeSamples(s)]));
    const line = `enqueue, business tx + event, ${connections} conn, commits/s${tag}`;
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
    const work = `enqueue ${connections} conn${tag}`;
    reportCpu(context, work, summaries, { per: 'µs per commit', unit: 'µs' }, [
      { versus: 'raw', target: 1.15 },
    ]);
    // Paired: the library's and raw's slices of a turn run back to back, so what moves the machine between
    // turns (other processes' bursts) moves both; the difference of the median rounds, as before, in the note.
    const paired = pairedDifference(sliceNodeUs.get('library')!, sliceNodeUs.get('raw')!);
    const ofMedians = library.cpu.nodeUs - raw.cpu.nodeUs;
    context.report.add({
      scenario: 'peers',
      label: `${work}: Node CPU µs per commit, library − raw per turn`,
      value: paired.median,
      unit: 'µs',
      goal: { on: 'value', op: '<=', target: NODE_CPU_MARGIN_US },
      note:
        `median of ${paired.pairs} turns' differences, IQR ${formatValue(paired.q1, '')} to ` +
        `${formatValue(paired.q3, 'µs')}; as before, of the rounds with the median total CPU: library ` +
        `${library.cpu.nodeUs.toFixed(0)} − raw ${raw.cpu.nodeUs.toFixed(0)} = ${formatValue(ofMedians, 'µs')}`,
    });
    reportStatements(context, summaries, { name: 'commit', scale: 1 }, [
      'library',
      'raw',
      bestPeer(summaries),
    ]);
  }
  await keyedEnqueueLine(run);
}

/**
 * Enqueue with an idempotency key (issue 36): the same business transaction, the event under a fresh key each
 * (the common case, a key not taken: what a request that is not a retry costs), beside the peers that have
 * deduplication at enqueue. 1 connection; CPU per commit against the best peer's.
 */
async function keyedEnqueueLine(run: PeersRun): Promise<void> {
  const { context, tag } = run;
  const keyedPeers = PEERS.filter((p) => p.dedupe !== undefined);
  for (const peer of keyedPeers) context.report.note(`${peer.name} dedupe: ${peer.dedupe}`);
  const systems: System[] = ['library', ...keyedPeers.map((p) => p.name)];
  const { samples } = await measureEnqueue(run, systems, 1, true);
  const summaries = new Map([...samples].map(([system, s]) => [system, summarizeSamples(s)]));
  const line = `enqueue with a dedupe key (library dedupe.key, graphile-worker job_key, pg-boss singletonKey), 1 conn, commits/s${tag}`;
  reportRates(context, line, '/s', summaries, { target: 1, againstBest: true });
  reportCpu(context, `keyed enqueue 1 conn${tag}`, summaries, { per: 'µs per commit', unit: 'µs' }, [
    { versus: bestPeer(summaries), target: 1 },
  ]);
  reportStatements(context, summaries, { name: 'commit', scale: 1 }, ['library', bestPeer(summaries)]);
}
