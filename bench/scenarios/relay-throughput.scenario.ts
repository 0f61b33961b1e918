/**
 * 2. Relay throughput. A backlog of pending events, two consumers per event, drained by 1 and by 2 relay
 * processes: the library (`relay.drain()` in a Nest app per process) against the raw batched relay at the same
 * batch size and process count, and the reference CRM's per-event pattern. Also WAL bytes per relayed event.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import type { ConsumerVariant } from '../harness/bench-consumers';
import { runRelayWorkers } from '../harness/relay-workers';
import { inTurn, median } from '../harness/stats';
import type { RelayKind } from '../workers/relay-worker.protocol';

interface DrainRun {
  eventsPerS: number;
  walBytesPerEvent: number;
  /** CPU per batch of BATCH_SIZE events, all instances together: Node, and PostgreSQL when it can be read. */
  cpuPerBatch: { nodeMs: number; postgresMs: number | null };
}

const BATCH_SIZE = OUTBOX_DEFAULTS.relay.batchSize;

const VARIANT_TEXT: Record<ConsumerVariant, string> = {
  'no-db': 'consumers without DB',
  'db-write': 'one consumer writes a row',
  'db-write-all': 'each consumer writes a row',
};

/**
 * The reference pattern drains at a steady rate whatever the backlog (about 1,000 events/s here): 10,000 events
 * are enough to measure it and keep the full run within its time budget.
 */
const REFERENCE_BACKLOG_MAX = 10_000;

/** Loads a fresh backlog, drains it with `instances` worker processes, checks every event was delivered once. */
async function drain(
  context: BenchContext,
  kind: RelayKind,
  variant: ConsumerVariant,
  instances: number,
  backlog = context.options.sizes.relayBacklog,
): Promise<DrainRun> {
  const { db, report } = context;
  await db.resetWithPendingEvents(backlog);
  const walBefore = await db.walPosition();
  const config = {
    url: db.url,
    kind,
    variant,
    batchSize: BATCH_SIZE,
    expectedEvents: backlog,
    sampleMemory: false,
  };
  const outcome = await runRelayWorkers(Array.from({ length: instances }, () => config));
  const walBytes = await db.walBytesSince(walBefore);
  const counts = await db.counts();
  const expectedEffects = variant === 'db-write' ? backlog : 0;
  const complete =
    counts.unsettled === 0 &&
    counts.deliveries === 2 * backlog &&
    counts.inbox === 2 * backlog &&
    counts.effects === expectedEffects;
  if (!complete) {
    report.note(
      `WARNING ${kind} ×${instances} (${variant}) left ${JSON.stringify(counts)}; ` +
        `expected ${backlog} events settled, 2 deliveries and inbox rows each`,
    );
  }
  const batches = backlog / BATCH_SIZE;
  const postgres = outcome.results.map((r) => r.cpu.postgresMs);
  return {
    eventsPerS: (backlog / outcome.elapsedMs) * 1000,
    walBytesPerEvent: walBytes / backlog,
    cpuPerBatch: {
      nodeMs: outcome.results.reduce((sum, r) => sum + r.cpu.nodeMs, 0) / batches,
      postgresMs: postgres.every((ms) => ms !== null)
        ? postgres.reduce((sum: number, ms) => sum + ms!, 0) / batches
        : null,
    },
  };
}

/** Each figure's median over runs of one side. */
function medianRun(runs: readonly DrainRun[]): DrainRun {
  const postgres = runs.map((r) => r.cpuPerBatch.postgresMs);
  return {
    eventsPerS: median(runs.map((r) => r.eventsPerS)),
    walBytesPerEvent: median(runs.map((r) => r.walBytesPerEvent)),
    cpuPerBatch: {
      nodeMs: median(runs.map((r) => r.cpuPerBatch.nodeMs)),
      postgresMs: postgres.every((ms) => ms !== null) ? median(postgres as number[]) : null,
    },
  };
}

/** `Node 4.4 ms + PostgreSQL 9.8 ms`, the CPU time a drain spent per batch (what bounds it on a small machine). */
function describeCpu(run: DrainRun): string {
  const { nodeMs, postgresMs } = run.cpuPerBatch;
  const node = `Node ${nodeMs.toFixed(1)} ms`;
  return postgresMs === null
    ? `${node} (PostgreSQL's share not readable: server on another machine)`
    : `${node} + PostgreSQL ${postgresMs.toFixed(1)} ms`;
}

export const relayThroughputScenario: BenchScenario = {
  name: 'relay',
  title:
    'Relay throughput (goals: ≥ 0.75× raw batched without DB use, stretch 0.90×; ≥ 0.60× with a DB write; ' +
    '≥ 4× the reference; 2 instances ≥ 1; WAL per event ≤ 1.15× raw)',
  async run(context) {
    const { report, options } = context;
    report.note(
      `${options.sizes.relayBacklog.toLocaleString('en-US')} pending events, 2 consumers each, batches of ${BATCH_SIZE} (the library's growing to ${OUTBOX_DEFAULTS.relay.maxBatchSize} while its handlers write nothing: its defaults); ` +
        'each relay instance is a child process (library: a Nest app calling relay.drain(); raw: one pg ' +
        'connection); time from a common start to the last instance done; ' +
        `median of ${options.sizes.relayRepeats} drain(s) per side, taking turns (raw first, then library first)`,
    );
    for (const variant of ['no-db', 'db-write'] as const) {
      const library = new Map<number, DrainRun>();
      for (const instances of [1, 2]) {
        const runs = { raw: [] as DrainRun[], library: [] as DrainRun[] };
        for (let repeat = 0; repeat < options.sizes.relayRepeats; repeat++) {
          for (const side of inTurn(['raw', 'library'] as const, repeat)) {
            runs[side].push(
              await drain(context, side === 'raw' ? 'raw-batched' : 'library', variant, instances),
            );
          }
        }
        const raw = medianRun(runs.raw);
        const lib = medianRun(runs.library);
        library.set(instances, lib);
        report.add({
          scenario: 'relay',
          label: `${VARIANT_TEXT[variant]}, ${instances} instance${instances > 1 ? 's' : ''}: events/s`,
          value: lib.eventsPerS,
          unit: '/s',
          versus: { label: 'raw batched', value: raw.eventsPerS },
          goal:
            variant === 'no-db'
              ? { on: 'ratio', op: '>=', target: 0.75, stretch: 0.9 }
              : { on: 'ratio', op: '>=', target: 0.6 },
        });
        report.note(`CPU per batch of ${BATCH_SIZE}: library ${describeCpu(lib)}; raw ${describeCpu(raw)}`);
        if (instances === 1) {
          report.add({
            scenario: 'relay',
            label: `${VARIANT_TEXT[variant]}: WAL bytes per relayed event`,
            value: lib.walBytesPerEvent,
            unit: 'B',
            versus: { label: 'raw batched', value: raw.walBytesPerEvent },
            goal: { on: 'ratio', op: '<=', target: 1.15 },
          });
        }
      }
      const referenceBacklog = Math.min(REFERENCE_BACKLOG_MAX, options.sizes.relayBacklog);
      const reference = await drain(context, 'raw-per-event', variant, 1, referenceBacklog);
      report.add({
        scenario: 'relay',
        label: `${VARIANT_TEXT[variant]}, 1 instance vs reference CRM pattern`,
        value: library.get(1)!.eventsPerS,
        unit: '/s',
        versus: { label: 'reference', value: reference.eventsPerS },
        goal: { on: 'ratio', op: '>=', target: 4 },
        note: `reference: the CRM's statements per event, over ${referenceBacklog.toLocaleString('en-US')} events`,
      });
      report.add({
        scenario: 'relay',
        label: `${VARIANT_TEXT[variant]}: 2 instances vs 1`,
        value: library.get(2)!.eventsPerS,
        unit: '/s',
        versus: { label: '1 instance', value: library.get(1)!.eventsPerS },
        goal: { on: 'ratio', op: '>=', target: 1 },
      });
    }
  },
};
