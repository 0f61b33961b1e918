/**
 * The peers scenario's latency lines: commit → handler time at a fixed rate, producer and consumers in this
 * process, systems in turns; p50 and p99, and CPU per event from `process.cpuUsage()` and the system's
 * PostgreSQL backends over the timed part (producer and consumers together, as each system runs them).
 */
import { Pool } from 'pg';
import { BENCH_TENANT } from '../../harness/bench-database';
import type { BenchContext } from '../../harness/bench-scenario';
import { peerEvent } from '../../harness/enqueue-transactors';
import {
  measureLibrary,
  measureRaw,
  pooled,
  timedRun,
  type LatencyRun,
  type Produce,
} from '../../harness/latency-runs';
import { reportCpu, summarizeSamples, type Sample, type System } from '../../harness/peers-report';
import { inTurn, now } from '../../harness/stats';
import { LATENCY_CONSUMER, type Peer } from '../../peers/peer';
import { PEERS, peerNamed } from '../../peers/peers';
import { insertContact } from '../../raw/raw.queries';
import { applicationName, resetAll, type PeersRun } from './peers-run';

/** A peer's latency run in this process, as the library's: a producer pool and the consumers side by side. */
async function measurePeerLatency(context: BenchContext, peer: Peer): Promise<LatencyRun> {
  const { db, options } = context;
  await resetAll(context);
  const name = applicationName(peer.name);
  const producerName = `${name}-producer`;
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
  const producer = await peer.openProducer(db.url, producerName);
  const pool = new Pool({ connectionString: db.url, max: 10, application_name: producerName });
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
    return await timedRun({
      query: db.sql.bind(db),
      rate: options.sizes.peersLatencyRate,
      seconds: options.sizes.peersLatencySeconds,
      produce,
      committedAt,
      handledAt,
      applicationNames: [name, producerName],
    });
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

/** A run's CPU per event, as a sample of the CPU lines (no statement counts here). */
function cpuSample(run: LatencyRun): Sample {
  const { nodeMs, postgresMs } = run.cpu;
  return {
    rate: run.ratePerS,
    nodeCpuUs: (nodeMs * 1000) / run.produced,
    serverCpuUs: postgresMs === null ? Number.NaN : (postgresMs * 1000) / run.produced,
    statements: Number.NaN,
    top: [],
  };
}

export async function latencyLines(run: PeersRun): Promise<void> {
  const { context, tag } = run;
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
  const rate = options.sizes.peersLatencyRate;
  report.note(
    `${rate}/s for ${options.sizes.peersLatencySeconds} s after a 1 s warm-up, ` +
      `${options.sizes.peersRounds} round(s) in turns, events pooled; producer and consumers in this process; ` +
      'one consumer per event (library: LatencyConsumer in its default app, without the query probe of the bench; ' +
      'peers: a job/message for one consumer)',
  );
  for (const peer of PEERS) {
    const peerRun = pooledRuns.get(peer.name)!;
    report.add({
      scenario: 'peers',
      label: `latency p50${tag}: library vs ${peer.name}`,
      value: library.p50,
      unit: 'ms',
      versus: { label: peer.name, value: peerRun.p50 },
      goal: peer.name === 'graphile-worker' ? { on: 'ratio', op: '<=', target: 1 } : undefined,
      note:
        `${peerRun.p50 < library.p50 ? `PEER LEADS: ${peer.name} p50 ${(library.p50 / peerRun.p50).toFixed(2)}× lower; ` : ''}` +
        `per-round p50: library ${p50Range('library')}, ${peer.name} ${p50Range(peer.name)}; ` +
        `p99 ${library.p99.toFixed(1)} vs ${peerRun.p99.toFixed(1)} ms` +
        (peerRun.missing > 0 ? `; WARNING ${peerRun.missing} of ${peerRun.produced} never handled` : ''),
    });
  }
  report.add({
    scenario: 'peers',
    label: `latency p99${tag}: library vs raw NOTIFY relay`,
    value: library.p99,
    unit: 'ms',
    versus: { label: 'raw', value: raw.p99 },
    goal: { on: 'ratio', op: '<=', target: 1 },
    note:
      `per-round p99: library ${range('library', 'p99')}, raw ${range('raw', 'p99')}; ` +
      `p50 library ${library.p50.toFixed(2)} ms, raw ${raw.p50.toFixed(2)} ms (per round ${p50Range('raw')})`,
  });
  const summaries = new Map([...runs].map(([system, r]) => [system, summarizeSamples(r.map(cpuSample))]));
  reportCpu(context, `latency at ${rate} events/s${tag}`, summaries, { per: 'µs per event', unit: 'µs' }, [
    { versus: 'raw', target: 1 },
  ]);
}
