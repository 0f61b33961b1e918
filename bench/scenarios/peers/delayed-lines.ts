/**
 * The peers scenario's delayed delivery line (issue 36): each system is given N events in one transaction, each
 * due at a known instant 1 to 3 s after the enqueue began (the library's `deliverAt`, graphile-worker's `run_at`,
 * pg-boss's `startAfter`), its relay or worker running; each handler's start − its event's due instant on this
 * process's clock, p50 and p99. The peers run at their default poll intervals, then again with the poll lowered to
 * the library's default `relay.pollIntervalMs`, labelled. CPU per event (Node + PostgreSQL) from the enqueue until
 * the last event was handled, the waiting included (so a peer that waits 30 s for its poll pays 30 s of idle
 * process and connections).
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { createBenchApp } from '../../harness/bench-app';
import { BENCH_EVENT, BENCH_TENANT } from '../../harness/bench-database';
import { LatencyConsumer } from '../../harness/bench-consumers';
import type { BenchContext } from '../../harness/bench-scenario';
import { CpuMeter } from '../../harness/cpu-meter';
import { peerEvent } from '../../harness/enqueue-transactors';
import { dueInstants, epochOf, lateness, latenessFigures } from '../../harness/lateness';
import { reportCpu, summarizeSamples, type Summary, type System } from '../../harness/peers-report';
import { inTurn, waitUntil } from '../../harness/stats';
import { LATENCY_CONSUMER, type Peer } from '../../peers/peer';
import { PEERS } from '../../peers/peers';
import type { CpuProfile } from '../../workers/relay-worker.protocol';
import { applicationName, resetAll, type PeersRun } from './peers-run';

/** The first event is due this long after the enqueue began, the last `SPAN_MS` later. */
const FIRST_DUE_MS = 1000;
const SPAN_MS = 2000;
/** How long past the last due instant a system may take: beyond pg-boss's 30 s notify-queue poll. */
const SETTLE_MS = 40_000;
const POLL_MS = OUTBOX_DEFAULTS.relay.pollIntervalMs;

interface DelayedRun {
  lateMs: number[];
  missing: number;
  events: number;
  /** How long the enqueue transaction took, committed; an event due before it ended could not be on time. */
  enqueueMs: number;
  cpu: CpuProfile;
}

/**
 * Waits until every event was handled (or `SETTLE_MS` past the last due instant), then stops the meter; the
 * handlers' starts are read on the monotonic clock (`performance.now()`), as epoch ms here, after the wait.
 */
async function settle(
  handledAt: ReadonlyMap<string, number>,
  dueAt: Map<string, number>,
  cpu: CpuMeter,
): Promise<Omit<DelayedRun, 'enqueueMs'>> {
  const last = Math.max(...dueAt.values());
  await waitUntil(() => handledAt.size >= dueAt.size, last - Date.now() + SETTLE_MS);
  const measured = await cpu.stop();
  const handled = new Map([...handledAt].map(([id, at]) => [id, epochOf(at)]));
  return { ...lateness(dueAt, handled), events: dueAt.size, cpu: measured };
}

async function measureLibrary(context: BenchContext, count: number): Promise<DelayedRun> {
  const { db } = context;
  const name = applicationName('library');
  const app = await createBenchApp({
    url: db.url,
    consumers: [LatencyConsumer],
    relay: { enabled: true },
    applicationName: name,
    probe: false,
  });
  try {
    const { handledAt } = app.context.get(LatencyConsumer);
    const cpu = await CpuMeter.start(db.sql.bind(db), [name]);
    const start = Date.now();
    const due = dueInstants(start, count, FIRST_DUE_MS, SPAN_MS);
    const dueAt = new Map<string, number>();
    await app.dataSource.transaction(async (manager) => {
      for (const at of due) {
        const event = peerEvent();
        const id = await app.outbox.enqueue(manager, {
          tenantId: BENCH_TENANT,
          eventName: BENCH_EVENT,
          payload: { contactId: event.contactId, name: event.name, email: event.email, dueAt: at },
          deliverAt: new Date(at),
        });
        dueAt.set(id, at);
      }
    });
    const enqueueMs = Date.now() - start;
    return { ...(await settle(handledAt, dueAt, cpu)), enqueueMs };
  } finally {
    await app.close();
  }
}

async function measurePeer(
  context: BenchContext,
  peer: Peer,
  count: number,
  pollIntervalMs?: number,
): Promise<DelayedRun> {
  const { db } = context;
  const name = applicationName(peer.name);
  const producerName = `${name}-producer`;
  const handledAt = new Map<string, number>();
  const consumers = await peer.startConsumers({
    url: db.url,
    consumers: [LATENCY_CONSUMER],
    applicationName: name,
    onHandled: (eventId) => {
      if (!handledAt.has(eventId)) handledAt.set(eventId, performance.now());
    },
    ...(pollIntervalMs === undefined ? {} : { pollIntervalMs }),
  });
  const producer = await peer.openProducer(db.url, producerName);
  const pool = new Pool({ connectionString: db.url, max: 1, application_name: producerName });
  try {
    const cpu = await CpuMeter.start(db.sql.bind(db), [name, producerName]);
    const start = Date.now();
    const due = dueInstants(start, count, FIRST_DUE_MS, SPAN_MS);
    const dueAt = new Map<string, number>();
    const client = await pool.connect();
    try {
      await client.query('begin');
      for (const at of due) {
        const event = peerEvent();
        await producer.enqueue(client, event, [LATENCY_CONSUMER], undefined, new Date(at));
        dueAt.set(event.eventId, at);
      }
      await client.query('commit');
    } finally {
      client.release();
    }
    const enqueueMs = Date.now() - start;
    return { ...(await settle(handledAt, dueAt, cpu)), enqueueMs };
  } finally {
    await consumers.stop();
    await producer.close();
    await pool.end();
  }
}

/** A system of this line: the library, a peer at its default poll, or a peer with its poll lowered. */
interface Entrant {
  label: string;
  system: System;
  measure: (context: BenchContext, count: number) => Promise<DelayedRun>;
}

function entrants(): Entrant[] {
  const delayedPeers = PEERS.filter((p) => p.delay !== undefined);
  return [
    { label: 'library', system: 'library', measure: measureLibrary },
    ...delayedPeers.map((peer) => ({
      label: peer.name,
      system: peer.name,
      measure: (context: BenchContext, count: number) => measurePeer(context, peer, count),
    })),
    ...delayedPeers.map((peer) => ({
      label: `${peer.name} (poll ${POLL_MS} ms)`,
      system: peer.name,
      measure: (context: BenchContext, count: number) => measurePeer(context, peer, count, POLL_MS),
    })),
  ];
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;

export async function delayedLines(run: PeersRun): Promise<void> {
  const { context, tag } = run;
  const { options, report } = context;
  const count = options.sizes.peersDelayedEvents;
  const all = entrants();
  for (const peer of PEERS) if (peer.delay) report.note(`${peer.name} delay: ${peer.delay}`);
  report.note(
    `delayed: ${count} events per system in one transaction, due ${FIRST_DUE_MS / 1000} to ` +
      `${(FIRST_DUE_MS + SPAN_MS) / 1000} s after the enqueue began, evenly; lateness = handler start − due, by this ` +
      `process’s clock; library: defaults (relay.pollIntervalMs ${POLL_MS}, its timer for the earliest due event); ` +
      `peers at their default poll, then with it lowered to ${POLL_MS} ms (labelled); ` +
      `${options.sizes.peersRounds} round(s) in turns, events pooled`,
  );
  const runs = new Map<string, DelayedRun[]>(all.map((e) => [e.label, []]));
  for (let round = 0; round < options.sizes.peersRounds; round++) {
    for (const entrant of inTurn(all, round)) {
      await resetAll(context);
      runs.get(entrant.label)!.push(await entrant.measure(context, count));
    }
  }
  const figures = new Map(
    [...runs].map(([label, r]) => [label, { ...latenessFigures(r.flatMap((x) => x.lateMs)), runs: r }]),
  );
  const describe = (label: string): string => {
    const f = figures.get(label)!;
    const missing = f.runs.reduce((sum, r) => sum + r.missing, 0);
    const enqueueMs = Math.max(...f.runs.map((r) => r.enqueueMs));
    return (
      `${label} p50 ${ms(f.p50)}, p99 ${ms(f.p99)}, earliest ${ms(f.min)}, enqueue ${enqueueMs} ms` +
      (missing > 0 ? `, WARNING ${missing} never handled` : '')
    );
  };
  report.note(`delayed lateness${tag}: ${all.map((e) => describe(e.label)).join('; ')}`);
  const library = figures.get('library')!;
  const peers = all.filter((e) => e.system !== 'library');
  const best = peers.reduce((a, b) => (figures.get(b.label)!.p99 < figures.get(a.label)!.p99 ? b : a));
  for (const peer of peers) {
    const other = figures.get(peer.label)!;
    report.add({
      scenario: 'peers',
      label: `delayed lateness p99${tag}: library vs ${peer.label}`,
      value: library.p99,
      unit: 'ms',
      versus: { label: peer.label, value: other.p99 },
      goal: peer === best ? { on: 'ratio', op: '<=', target: 1 } : undefined,
      note:
        `${peer === best ? 'the best peer’s p99; ' : ''}` +
        `p50 library ${ms(library.p50)}, ${peer.label} ${ms(other.p50)}`,
    });
  }
  // CPU per event at the defaults (the lowered polls in the note below)
  const cpuOf = (label: string): Summary =>
    summarizeSamples(
      figures.get(label)!.runs.map((r) => ({
        rate: r.events,
        nodeCpuUs: (r.cpu.nodeMs * 1000) / r.events,
        serverCpuUs: r.cpu.postgresMs === null ? Number.NaN : (r.cpu.postgresMs * 1000) / r.events,
        statements: Number.NaN,
        top: [],
      })),
    );
  const defaults = all.filter((e) => e.label === e.system);
  reportCpu(
    context,
    `delayed ${count} events, enqueue to last handler${tag}`,
    new Map(defaults.map((e) => [e.system, cpuOf(e.label)])),
    { per: 'µs per event', unit: 'µs' },
    defaults.filter((e) => e.system !== 'library').map((e) => ({ versus: e.system })),
  );
  const lowered = all.filter((e) => e.label !== e.system);
  report.note(
    `delayed, peers' poll lowered to ${POLL_MS} ms${tag}: CPU µs per event, Node + PostgreSQL: ` +
      lowered
        .map((e) => {
          const c = cpuOf(e.label).cpu;
          return `${e.label} ${c.nodeUs.toFixed(0)} + ${c.serverUs.toFixed(0)} = ${c.totalUs.toFixed(0)}`;
        })
        .join('; '),
  );
}
