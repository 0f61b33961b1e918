/**
 * 5. Memory. RSS of a relay process (a child process sampling its own RSS, plus the kernel's VmHWM) while it
 * drains a large backlog, at each quarter of the way, against the raw batched relay doing the same.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import type { ConsumerVariant } from '../harness/bench-consumers';
import { runRelayWorkers } from '../harness/relay-workers';
import type { MemoryProfile, RelayKind } from '../workers/relay-worker.protocol';

/** Consumers without DB use: the relay's own memory, and a drain twice as fast as with a write (the full run stays in budget). */
const VARIANT: ConsumerVariant = 'no-db';
const MiB = 1024 * 1024;

async function profile(
  context: BenchContext,
  kind: RelayKind,
): Promise<{ memory: MemoryProfile; eventsPerS: number }> {
  const { db, options } = context;
  const events = options.sizes.memoryEvents;
  await db.resetWithPendingEvents(events);
  const outcome = await runRelayWorkers([
    {
      url: db.url,
      kind,
      variant: VARIANT,
      batchSize: OUTBOX_DEFAULTS.relay.batchSize,
      expectedEvents: events,
      sampleMemory: true,
    },
  ]);
  return { memory: outcome.results[0]!.memory!, eventsPerS: (outcome.events / outcome.elapsedMs) * 1000 };
}

function describe(memory: MemoryProfile): string {
  const mib = (bytes: number): string => (bytes / MiB).toFixed(1);
  const rss = memory.atProgress.map((p) => `${p.progress * 100}% ${mib(p.rssBytes)}`).join(', ');
  const heap = memory.atProgress.map((p) => mib(p.heapUsedBytes)).join(' / ');
  return `RSS start ${mib(memory.startRssBytes)}, ${rss} MiB; heap in use ${heap} MiB`;
}

function rssAt(memory: MemoryProfile, progress: number): number {
  return memory.atProgress.find((p) => p.progress === progress)?.rssBytes ?? Number.NaN;
}

export const memoryScenario: BenchScenario = {
  name: 'memory',
  title:
    'Memory (goal: relay RSS flat while draining — RSS at 100% ≤ 1.10× RSS at 25%, both after a full GC)',
  async run(context) {
    const { report, options } = context;
    const library = await profile(context, 'library');
    const raw = await profile(context, 'raw-batched');
    const peak = (m: MemoryProfile): number => (m.vmHwmBytes ?? m.peakRssBytes) / MiB;
    report.add({
      scenario: 'memory',
      label: `peak RSS of the relay process, ${options.sizes.memoryEvents.toLocaleString('en-US')} events`,
      value: peak(library.memory),
      unit: 'MiB',
      versus: { label: 'raw batched', value: peak(raw.memory) },
    });
    report.add({
      scenario: 'memory',
      label: 'library RSS at 100% vs at 25% of the drain',
      value: rssAt(library.memory, 1) / MiB,
      unit: 'MiB',
      versus: { label: '25%', value: rssAt(library.memory, 0.25) / MiB },
      goal: { on: 'ratio', op: '<=', target: 1.1 },
    });
    report.note(
      `library: ${describe(library.memory)} (drained at ${library.eventsPerS.toFixed(0)} events/s)`,
    );
    report.note(`raw:     ${describe(raw.memory)} (drained at ${raw.eventsPerS.toFixed(0)} events/s)`);
    report.note(
      `one child process each, 2 consumers per event (neither uses the DB), ` +
        `batches of ${OUTBOX_DEFAULTS.relay.batchSize} (the library's growing to ${OUTBOX_DEFAULTS.relay.maxBatchSize}: its defaults); peak = VmHWM; samples at each quarter taken after a full GC`,
    );
  },
};
