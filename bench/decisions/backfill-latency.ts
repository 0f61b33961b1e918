/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/backfill-latency.ts`
 *
 * What a backfill does to live traffic (ADR 1011): HISTORY (default 100,000) published events delivered to one
 * consumer, then a second consumer joins and is backfilled from the oldest, while live events are enqueued at
 * RATE (default 100) per second, one per transaction. Per variant — no backfill (WINDOW_MS of live traffic alone,
 * default 15 s), unthrottled (`pauseMs: 0`), and pauses of 50, 250 and 1,000 ms (the default) —
 * commit → handler latency of the live events (p50, p99, max, in ms) from the backfill's start until every
 * backfilled delivery was handled, the backfill's own duration, and how long until its deliveries were all
 * handled. Both consumers in-process, no-op; the relay as shipped, polling every second, woken by commits.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
// internal (not exported by the package): the pace is the script's variable; run from source, one copy of the class
import { OutboxBackfill } from '../../libs/outbox/src/consumers/outbox-backfill';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_EVENT, BENCH_TENANT } from '../harness/bench-database';
import { percentile, sleep } from '../harness/stats';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const HISTORY = Number(process.env.HISTORY ?? 100_000);
const RATE = Number(process.env.RATE ?? 100);
const WINDOW_MS = Number(process.env.WINDOW_MS ?? 15_000);
const VARIANTS: Record<string, number | null> = {
  'no backfill': null,
  'unthrottled (pauseMs 0)': 0,
  'throttled (pauseMs 50)': 50,
  'throttled (pauseMs 250)': 250,
  'throttled (pauseMs 1000, the default)': 1000,
};

/** The consumer of history and live events: when each event reached it. */
@Injectable()
class LiveConsumer {
  readonly handledAt = new Map<string, number>();

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.live' })
  handle(event: OutboxEvent): void {
    if (!this.handledAt.has(event.eventId)) this.handledAt.set(event.eventId, performance.now());
  }
}

/** The consumer that joins late: how many events reached it. */
@Injectable()
class LateConsumer {
  handled = 0;

  @OnOutboxEvent(BENCH_EVENT, { consumer: 'bench.late' })
  handle(): void {
    this.handled++;
  }
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `backfill-latency: ${HISTORY.toLocaleString('en-US')} events backfilled to a late consumer, live events at ${RATE}/s`,
      serverVersion,
    );
    for (const [variant, pauseMs] of Object.entries(VARIANTS)) {
      await db.truncate();
      await db.loadPublishedHistory(HISTORY, ['bench.live']);
      await db.vacuumAnalyze();
      const app = await createBenchApp({
        url: db.url,
        consumers: [LiveConsumer, LateConsumer],
        relay: { enabled: true, pollIntervalMs: 1000 },
        probe: false,
      });
      try {
        const live = app.context.get(LiveConsumer);
        const late = app.context.get(LateConsumer);
        const committedAt = new Map<string, number>();
        let flowing = true;
        const producer = (async () => {
          const gap = 1000 / RATE;
          let next = performance.now();
          while (flowing) {
            const id = await app.dataSource.transaction((manager) =>
              app.outbox.enqueue(manager, { tenantId: BENCH_TENANT, eventName: BENCH_EVENT, payload: {} }),
            );
            committedAt.set(id, performance.now());
            next += gap;
            await sleep(Math.max(0, next - performance.now()));
          }
        })();
        await sleep(2000); // the relay's first heartbeat and rounds, before measuring
        committedAt.clear();
        const began = performance.now();
        let backfillMs = Number.NaN;
        if (pauseMs === null) await sleep(WINDOW_MS);
        else {
          const result = await app.context
            .get(OutboxBackfill)
            .run({ consumer: 'bench.late', tenantId: null, since: null, eventNames: null }, { pauseMs });
          backfillMs = performance.now() - began;
          if (result.totalCreated !== HISTORY)
            throw new Error(`${variant}: created ${result.totalCreated} of ${HISTORY}`);
          const deadline = performance.now() + 300_000;
          while (late.handled < HISTORY && performance.now() < deadline) await sleep(50);
        }
        const handledMs = performance.now() - began;
        const window = [...committedAt.keys()];
        flowing = false;
        await producer;
        const deadline = performance.now() + 30_000;
        while (window.some((id) => !live.handledAt.has(id)) && performance.now() < deadline) await sleep(20);
        const latencies = window
          .filter((id) => live.handledAt.has(id))
          .map((id) => live.handledAt.get(id)! - committedAt.get(id)!);
        const missing = window.length - latencies.length;
        print(
          `  ${variant.padEnd(34)} live p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms, ` +
            `max ${Math.max(...latencies).toFixed(0)} ms over ${latencies.length} events${missing ? ` (${missing} not handled)` : ''}` +
            (pauseMs === null
              ? ''
              : `; backfill ${(backfillMs / 1000).toFixed(1)} s, all its deliveries handled after ${(handledMs / 1000).toFixed(1)} s`),
        );
      } finally {
        await app.close();
      }
    }
  } finally {
    await close();
  }
}

exitWhenDone(main());
