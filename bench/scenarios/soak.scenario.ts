/**
 * 8. Soak (issue 37, "a day of load, measured"). A producer app that does not relay commits contacts and their
 * events at a steady rate; a relay app (woken by the producer's NOTIFY) delivers each to two consumers, one of
 * which writes a row; retention purges settled events; autovacuum runs on the tables, as in production. Every
 * window the run reads the outbox tables' and indexes' size, their dead tuples, commit → handler p50/p99, the
 * relay's events/s, CPU per event (this process, and the relay's and producer's backends), RSS, and the claim's
 * mean execution from pg_stat_statements. Goals: the last window over the first once retention has cycled.
 *
 * `--hold=S` holds a repeatable-read snapshot on a second connection for S seconds in the middle of the run,
 * asks the doctor (OutboxAdminService.doctor()) whether it names the holder, and shows what the hold does to the
 * claim, dead rows and latency (issue 39). The run's data goes to `<out>/soak-<time>.json`, its plots to
 * `.svg` and `.png` beside it.
 *
 * The floors: retention refuses to purge events settled less than an hour ago (outbox_purge_settled and, on the
 * partitioned layout, outbox_drop_partitions check their cut-off), too long for a run of minutes. The bench lowers
 * it in its own throwaway database only (bench/harness/bench-floors.ts): the functions take
 * `now() - <soakRetentionSeconds>` as their cut-off (the options ask for 2 hours, which passes the floor check),
 * and are restored afterwards. On the partitioned layout, `--range-minutes=N` (BENCH ONLY, the library's ranges
 * are an hour wide at least) gives ranges that the relay makes ahead and retention drops during the run; each
 * window counts the ranges kept, made and dropped. The library's code is unchanged.
 */
import { cpus, loadavg } from 'node:os';
import { OutboxAdminModule, OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { OutboxMetrics, OutboxMetricsModule } from 'nestjs-pg-outbox/observability';
import { createBenchApp, type BenchApp } from '../harness/bench-app';
import type { BenchScenario } from '../harness/bench-scenario';
import { SoakConsumers } from '../harness/bench-consumers';
import { commitContactEvent } from '../harness/latency-runs';
import { SnapshotHolder } from '../harness/snapshot-holder';
import {
  holdEffect,
  judgeSoak,
  soakWindow,
  type SoakReading,
  type SoakWindow,
} from '../harness/soak-windows';
import {
  describeStatements,
  describeWindow,
  doctorCall,
  reportHold,
  writeOutcome,
  type DoctorCall,
} from '../harness/soak-report';
import { PRODUCER_APP, RELAY_APP, SoakReader } from '../harness/soak-readings';
import { lowerRetentionFloor, rangesAhead } from '../harness/bench-floors';
import { StatementStats } from '../harness/statement-stats';
import {
  ActivitySampler,
  attributeSlowest,
  describeAttribution,
  type EventInterval,
} from '../harness/soak-activity';
import { now, sleep, waitUntil } from '../harness/stats';

/** Tables whose autovacuum the bench database turns off for the other scenarios, on again for this one. */
const VACUUMED_TABLES = [
  'event_outbox',
  'outbox_deliveries',
  'consumer_inbox',
  'contacts',
  'consumer_effects',
];
/** Asked of retention so that the function's floor check passes; the rewritten function ignores it. */
const RETENTION_DAYS_ASKED = 2 / 24;

export const soakScenario: BenchScenario = {
  name: 'soak',
  title:
    'Soak (goals, last window over the first after retention cycled: size ≤ 1.1×, p99 ≤ 1.2×, throughput ≥ 0.9×)',
  async run(context) {
    const { db, options, report } = context;
    const { sizes, soak } = options;
    const minutes = soak.minutes ?? sizes.soakMinutes;
    const totalS = minutes * 60;
    const windowS = Math.min(sizes.soakWindowSeconds, totalS / 4);
    const windowCount = Math.round(totalS / windowS);
    const holdSpan =
      soak.holdSeconds > 0
        ? { startS: (totalS - soak.holdSeconds) / 2, endS: (totalS + soak.holdSeconds) / 2 }
        : null;
    // The doctor warns about a transaction open for 5 minutes by default; a shorter hold is named from a quarter of it.
    const doctorWarnS = Math.min(300, Math.max(5, Math.floor(soak.holdSeconds / 4)));

    await db.truncate();
    await db.checkpoint();
    const stats = await StatementStats.enable(db, 'all');
    const restoreFloor = await lowerRetentionFloor(db, sizes.soakRetentionSeconds);
    await db.setAutovacuum(VACUUMED_TABLES, true);
    const relay = await createBenchApp({
      url: db.url,
      consumers: [SoakConsumers],
      relay: { enabled: true },
      retention: { publishedDays: RETENTION_DAYS_ASKED, intervalMs: sizes.soakRetentionIntervalMs },
      // the fan-outs' reasons, per window (`outbox_relay_fan_outs_total`); no reading of the oldest pending age
      imports: [OutboxAdminModule, OutboxMetricsModule.forRoot({ oldestPendingAge: false })],
      applicationName: RELAY_APP,
      probe: false,
    });
    let producer: BenchApp | null = null;
    let holder = null as SnapshotHolder | null;
    let sampler = null as ActivitySampler | null;
    try {
      producer = await createBenchApp({
        url: db.url,
        consumers: [],
        relay: { enabled: false },
        applicationName: PRODUCER_APP,
        probe: false,
      });
      const consumers = relay.context.get(SoakConsumers);
      const doctor = relay.context.get(OutboxAdminService);
      const committedAt = new Map<string, number>();
      let committed = 0;
      const loadBefore = loadavg();
      const [naptime] = await db.sql<{ setting: string }>(
        `select current_setting('autovacuum_naptime') as setting`,
      );
      report.note(
        `${soak.rate} events/s for ${minutes} min in ${windowCount} windows of ${windowS} s; two consumers (one writes a row); ` +
          `relay woken by the producer app's NOTIFY; retention every ${sizes.soakRetentionIntervalMs / 1000} s purges events settled ` +
          `over ${sizes.soakRetentionSeconds} s ago (floor lowered for the bench: see bench-floors.ts)${layoutNote(context.options.layout, context.options.rangeMinutes)}; autovacuum on ` +
          `(naptime ${naptime!.setting}); ` +
          `load average at start ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
      );
      if (!stats.available)
        report.note(`pg_stat_statements unavailable (${stats.reason}): no claim execution time`);

      // the load
      const began = now();
      const endAt = began + totalS * 1000;
      const failures: string[] = [];
      const producing = produceSteadily(
        soak.rate,
        endAt,
        async () => {
          const id = await commitContactEvent(producer!);
          committedAt.set(id, now());
          committed++;
        },
        (error) => failures.push(error instanceof Error ? error.message : String(error)),
      );

      const reader = new SoakReader(db, stats.available, relay.context.get(OutboxMetrics).registry);
      // --activity: what the other backends did while each window's slowest events waited (see soak-activity.ts)
      sampler = soak.activity ? await ActivitySampler.start(db.url) : null;
      const attributions: string[] = [];
      const readings: SoakReading[] = [await reader.read(0, 0, consumers.handled)];
      const windows: SoakWindow[] = [];
      const doctorCalls: DoctorCall[] = [];
      const askDoctor = async (atS: number): Promise<void> => {
        const found = await doctor.doctor({ thresholds: { transactionSeconds: [doctorWarnS, 1800] } });
        doctorCalls.push(doctorCall(found, atS, holder));
      };
      // the hold's start and end, on schedule between the windows' readings
      const steps = holdSpan
        ? [
            {
              atS: holdSpan.startS,
              run: async (): Promise<void> => {
                holder = await SnapshotHolder.hold(db.url);
                report.note(
                  `snapshot held by pid ${holder.pid} from ${((now() - began) / 1000).toFixed(0)} s`,
                );
              },
            },
            {
              atS: holdSpan.endS,
              run: async (): Promise<void> => {
                await askDoctor((now() - began) / 1000);
                await holder?.release();
                report.note(`snapshot released at ${((now() - began) / 1000).toFixed(0)} s`);
              },
            },
          ]
        : [];
      if (holdSpan) await askDoctor(0);
      for (let w = 1; w <= windowCount; w++) {
        const boundary = began + w * windowS * 1000;
        while (steps.length > 0 && began + steps[0]!.atS * 1000 < boundary) {
          const step = steps.shift()!;
          await sleep(began + step.atS * 1000 - now());
          await step.run();
        }
        await sleep(boundary - now());
        const reading = await reader.read((now() - began) / 1000, committed, consumers.handled);
        const intervals = takeIntervals(committedAt, consumers.handledAt);
        const window = soakWindow(
          w - 1,
          readings[readings.length - 1]!,
          reading,
          intervals.map((i) => i.handled - i.committed),
          holdSpan,
        );
        readings.push(reading);
        windows.push(window);
        report.note(describeWindow(window));
        if (sampler) {
          const line = `window ${w}${window.heldS >= windowS / 2 ? ' (held)' : ''}: ${describeAttribution(
            attributeSlowest(intervals, sampler.taken(), {
              from: began + (w - 1) * windowS * 1000,
              to: began + w * windowS * 1000,
            }),
          )}`;
          attributions.push(line);
          report.note(line);
        }
        if (window.statements.length > 0) report.note(describeStatements(window));
        if (w === 1 && window.latencyCount === 0)
          throw new Error(
            `soak: the relay handled no event in the first ${windowS} s (${failures.length} enqueue failures` +
              `${failures[0] ? `, first: ${failures[0]}` : ''}): is the relay running and the database reachable?`,
          );
        if (holdSpan && window.heldS > 0) await askDoctor(reading.atS);
      }
      const produced = await producing;
      await holder?.release();
      const caughtUp = await waitUntil(() => consumers.handled >= produced.count, 60_000, 100);
      const loadAfter = loadavg();
      if (failures.length > 0)
        report.note(`WARNING ${failures.length} enqueue failures, first: ${failures[0]}`);
      if (!caughtUp)
        report.note(
          `WARNING ${produced.count - consumers.handled} of ${produced.count} events not handled 60 s after the load`,
        );
      report.note(
        `produced ${produced.count} events (${((produced.count / totalS) | 0).toLocaleString('en-US')}/s achieved); ` +
          `load average at end ${loadAfter.map((l) => l.toFixed(2)).join(' ')}`,
      );

      const busiest = Math.max(...windows.map((w) => w.loadAverage));
      if (busiest > 2 * cpus().length)
        report.note(
          `WARNING the machine was busy (load average up to ${busiest.toFixed(1)} on ${cpus().length} cores): ` +
            `a window whose backlog grows measures the machine's share given to this process, not the relay`,
        );
      const verdict = judgeSoak(windows);
      if (verdict.judged) {
        report.note(
          `ratios: window ${verdict.last.index + 1} over window ${verdict.first.index + 1} (the first after retention's first purge)`,
        );
        for (const goal of verdict.goals) {
          report.add({
            scenario: 'soak',
            label: `${goal.label}, last window`,
            value: goal.last,
            unit: goal.unit,
            versus: { label: `window ${verdict.first.index + 1}`, value: goal.first },
            goal: { on: 'ratio', op: goal.op, target: goal.target },
          });
        }
      } else {
        report.note(`WARNING goals not judged: ${verdict.reason}`);
      }
      const effect = holdEffect(windows);
      if (effect) reportHold(context, effect, doctorCalls, holdSpan!);

      const outcome = {
        scenario: 'soak',
        startedAt: new Date(Date.now() - (now() - began)).toISOString(),
        settings: {
          rate: soak.rate,
          minutes,
          layout: context.options.layout,
          rangeMinutes: context.options.rangeMinutes,
          windowSeconds: windowS,
          retentionSeconds: sizes.soakRetentionSeconds,
          retentionIntervalMs: sizes.soakRetentionIntervalMs,
          holdSeconds: soak.holdSeconds,
          hold: holdSpan,
          doctorTransactionWarnSeconds: doctorWarnS,
        },
        environment: {
          loadAverageAtStart: loadBefore,
          loadAverageAtEnd: loadAfter,
          statementStats: stats.available,
        },
        produced: produced.count,
        handled: consumers.handled,
        failures: failures.length,
        windows,
        ...(sampler ? { attributions } : {}),
        doctor: doctorCalls,
        verdict,
        hold: effect,
      };
      await writeOutcome(context, outcome, windows, holdSpan);
    } finally {
      await sampler?.stop();
      await holder?.release();
      await producer?.close();
      await relay.close();
      await db.setAutovacuum(VACUUMED_TABLES, false);
      await restoreFloor();
      await stats.disable();
    }
  },
};

/** The layout's ranges, as the note at the start says them. */
function layoutNote(layout: string, rangeMinutes: number | null): string {
  if (layout !== 'partitioned') return '';
  return rangeMinutes === null
    ? '; partitioned layout, daily ranges (retention drops none in a run of minutes; --range-minutes=N)'
    : `; partitioned layout, ranges of ${rangeMinutes} min (BENCH ONLY: --range-minutes), ${rangesAhead(rangeMinutes)} made ahead`;
}

/** Commits `rate` events a second until `endAt`, on schedule, without keeping a promise per event. */
async function produceSteadily(
  rate: number,
  endAt: number,
  produce: () => Promise<void>,
  onError: (error: unknown) => void,
): Promise<{ count: number }> {
  const began = now();
  const inFlight = new Set<Promise<void>>();
  let count = 0;
  for (;;) {
    const due = began + (count * 1000) / rate;
    if (due >= endAt) break;
    if (due - now() >= 1) await sleep(due - now());
    const p: Promise<void> = produce()
      .catch(onError)
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
    count++;
    // a stalled database must not pile up connections' worth of waiting commits without end
    if (inFlight.size >= rate) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return { count };
}

/** The commit → handler intervals of the events both committed and handled since the last call; both maps lose them. */
function takeIntervals(committedAt: Map<string, number>, handledAt: Map<string, number>): EventInterval[] {
  const intervals: EventInterval[] = [];
  for (const [id, handled] of handledAt) {
    const committed = committedAt.get(id);
    if (committed === undefined) continue;
    intervals.push({ committed, handled });
    handledAt.delete(id);
    committedAt.delete(id);
  }
  return intervals;
}
