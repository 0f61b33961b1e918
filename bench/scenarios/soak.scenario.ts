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
 * The floor: retention refuses to purge events settled less than an hour ago (outbox_purge_settled checks its
 * cut-off), too long for a run of minutes. The bench lowers it in its own throwaway database only: it rewrites
 * that function's cut-off to `now() - <soakRetentionSeconds>` (the options ask for 2 hours, which passes the
 * floor check) and restores it afterwards. The library's code is unchanged.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { OutboxAdminModule, OutboxAdminService, type OutboxDoctorReport } from 'nestjs-pg-outbox/admin';
import { createBenchApp, type BenchApp } from '../harness/bench-app';
import { cpuSpentMs, readBackendCpu, type BackendCpuSample, type RowsQuery } from '../harness/backend-cpu';
import type { BenchDatabase } from '../harness/bench-database';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import { SoakConsumers } from '../harness/bench-consumers';
import { commitContactEvent } from '../harness/latency-runs';
import { renderPng, svgSize } from '../harness/png-render';
import { SnapshotHolder } from '../harness/snapshot-holder';
import {
  holdEffect,
  judgeSoak,
  soakWindow,
  type SoakReading,
  type SoakWindow,
} from '../harness/soak-windows';
import { soakPlots } from '../harness/soak-plots';
import { StatementStats } from '../harness/statement-stats';
import { now, sleep, waitUntil } from '../harness/stats';

const RELAY_APP = 'bench-soak-relay';
const PRODUCER_APP = 'bench-soak-producer';
const MiB = 1024 * 1024;
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

/** One call of the doctor during the run. */
interface DoctorCall {
  atS: number;
  holding: boolean;
  severity: string;
  /** Whether a non-ok `transactions` finding names the holder's pid. */
  namesHolder: boolean;
  holderSummary: string | null;
  /** Every finding that is not ok, as `check: summary`. */
  problems: string[];
}

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
    const stats = await StatementStats.enable(db);
    const restoreFloor = await lowerPurgeFloor(db, sizes.soakRetentionSeconds);
    for (const table of VACUUMED_TABLES)
      await db.sql(`alter table public.${table} reset (autovacuum_enabled)`);
    const relay = await createBenchApp({
      url: db.url,
      consumers: [SoakConsumers],
      relay: { enabled: true },
      retention: { publishedDays: RETENTION_DAYS_ASKED, intervalMs: sizes.soakRetentionIntervalMs },
      imports: [OutboxAdminModule],
      applicationName: RELAY_APP,
      probe: false,
    });
    let producer: BenchApp | null = null;
    let holder = null as SnapshotHolder | null;
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
          `over ${sizes.soakRetentionSeconds} s ago (floor lowered for the bench: see soak.scenario.ts); autovacuum on ` +
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

      const reader = new ReadingTaker(db, stats.available);
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
        const window = soakWindow(
          w - 1,
          readings[readings.length - 1]!,
          reading,
          takeLatencies(committedAt, consumers.handledAt),
          holdSpan,
        );
        readings.push(reading);
        windows.push(window);
        report.note(describeWindow(window));
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
        doctor: doctorCalls,
        verdict,
        hold: effect,
      };
      await writeOutcome(context, outcome, windows, holdSpan);
    } finally {
      await holder?.release();
      await producer?.close();
      await relay.close();
      for (const table of VACUUMED_TABLES)
        await db.sql(`alter table public.${table} set (autovacuum_enabled = false)`);
      await restoreFloor();
      await stats.disable();
    }
  },
};

/**
 * Lets retention purge events settled `seconds` ago in this database: the purge function's cut-off becomes
 * `now() - seconds` (its floor check of the argument stays). Returns what puts the function back.
 */
async function lowerPurgeFloor(db: BenchDatabase, seconds: number): Promise<() => Promise<void>> {
  const [row] = await db.sql<{ definition: string }>(
    `select pg_get_functiondef('public.outbox_purge_settled(timestamptz, integer)'::regprocedure) as definition`,
  );
  const original = row!.definition;
  const cutOff = 'published_at < older_than';
  if (!original.includes(cutOff))
    throw new Error(
      `soak: outbox_purge_settled no longer compares "${cutOff}"; update lowerPurgeFloor in bench/scenarios/soak.scenario.ts`,
    );
  await db.sql(original.replace(cutOff, `published_at < now() - make_interval(secs => ${Number(seconds)})`));
  return async () => {
    await db.sql(original);
  };
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

/** Latencies of the events both committed and handled since the last call; both maps lose them. */
function takeLatencies(committedAt: Map<string, number>, handledAt: Map<string, number>): number[] {
  const latencies: number[] = [];
  for (const [id, handled] of handledAt) {
    const committed = committedAt.get(id);
    if (committed === undefined) continue;
    latencies.push(handled - committed);
    handledAt.delete(id);
    committedAt.delete(id);
  }
  return latencies;
}

/**
 * Reads the counters of a window's boundary. The backends' CPU is summed from one readable sample to the next
 * (a pool connection opened in between counts from zero); a boundary whose backends cannot be read (one closed
 * while being read, three times over) has none, and neither window beside it gets a figure.
 */
class ReadingTaker {
  private readonly relay = new BackendCpuTotal([RELAY_APP]);
  private readonly producer = new BackendCpuTotal([PRODUCER_APP]);

  constructor(
    private readonly db: BenchDatabase,
    private readonly statements: boolean,
  ) {}

  async read(atS: number, produced: number, handled: number): Promise<SoakReading> {
    const query = this.db.sql.bind(this.db);
    const relayCpu = await this.relay.read(query);
    const producerCpu = await this.producer.read(query);
    const node = process.cpuUsage();
    const tables = await this.db.sql<{
      name: string;
      table_bytes: string;
      index_bytes: string;
      dead: string;
      deleted: string;
    }>(
      `select s.relname as name, pg_table_size(s.relid)::text as table_bytes,
              pg_indexes_size(s.relid)::text as index_bytes, s.n_dead_tup::text as dead, s.n_tup_del::text as deleted
         from pg_stat_user_tables s
        where s.schemaname = 'public' and (s.relname in ('event_outbox', 'consumer_inbox') or s.relname like 'outbox\\_%')`,
    );
    const statements = this.statements ? await this.statementTotals() : null;
    return {
      atS,
      tables: Object.fromEntries(
        tables.map((t) => [
          t.name,
          {
            tableBytes: Number(t.table_bytes),
            indexBytes: Number(t.index_bytes),
            deadTuples: Number(t.dead),
            deletedTuples: Number(t.deleted),
          },
        ]),
      ),
      produced,
      handled,
      nodeCpuMs: (node.user + node.system) / 1000,
      relayBackendCpuMs: relayCpu,
      producerBackendCpuMs: producerCpu,
      rssBytes: process.memoryUsage().rss,
      loadAverage: loadavg()[0]!,
      claims: statements?.claims ?? null,
      dueScans: statements?.due ?? null,
    };
  }

  /** The claims (new events, due retries) and the due-tenant scans so far. */
  private async statementTotals(): Promise<{
    claims: { calls: number; execMs: number };
    due: { calls: number; execMs: number };
  }> {
    const [row] = await this.db.sql<{ cc: string; cm: number; dc: string; dm: number }>(
      `select coalesce(sum(calls) filter (where query like any($1::text[])), 0)::text as cc,
              coalesce(sum(total_exec_time) filter (where query like any($1::text[])), 0)::float8 as cm,
              coalesce(sum(calls) filter (where query like '%outbox_due_tenants%'), 0)::text as dc,
              coalesce(sum(total_exec_time) filter (where query like '%outbox_due_tenants%'), 0)::float8 as dm
         from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())`,
      [['with fresh as%', 'with retry as%']],
    );
    return {
      claims: { calls: Number(row!.cc), execMs: row!.cm },
      due: { calls: Number(row!.dc), execMs: row!.dm },
    };
  }
}

/** CPU of the backends of some `application_name`s, summed since the first reading. */
class BackendCpuTotal {
  private sample: BackendCpuSample = null;
  private total = 0;

  constructor(private readonly applicationNames: readonly string[]) {}

  /** Milliseconds since the first reading, or null when the backends cannot be read now. */
  async read(query: RowsQuery): Promise<number | null> {
    let sample: BackendCpuSample = null;
    for (let attempt = 0; attempt < 3 && sample === null; attempt++)
      sample = await readBackendCpu(query, this.applicationNames);
    if (sample === null) return null;
    this.total += cpuSpentMs(this.sample ?? sample, sample) ?? 0;
    this.sample = sample;
    return this.total;
  }
}

function doctorCall(found: OutboxDoctorReport, atS: number, holder: SnapshotHolder | null): DoctorCall {
  const holding = holder !== null && !holder.isReleased;
  const finding = holder
    ? found.findings.find(
        (f) => f.check === 'transactions' && f.severity !== 'ok' && f.figures.pid === holder.pid,
      )
    : undefined;
  return {
    atS: Math.round(atS),
    holding,
    severity: found.severity,
    namesHolder: finding !== undefined,
    holderSummary: finding?.summary ?? null,
    problems: found.findings
      .filter((f) => f.severity !== 'ok')
      .map((f) => `${f.check} (${f.severity}): ${f.summary}`),
  };
}

function describeWindow(w: SoakWindow): string {
  const ms = (v: number | null): string =>
    v === null || !Number.isFinite(v) ? 'n/a' : v.toFixed(v < 10 ? 2 : 0);
  const k = (v: number): string => (v >= 1000 ? `${(v / 1000).toFixed(1)}k` : String(v));
  return (
    `w${w.index + 1} ${w.startS.toFixed(0)}–${w.endS.toFixed(0)} s: ${(w.sizeBytes / MiB).toFixed(1)} MiB ` +
    `(indexes ${(w.indexBytes / MiB).toFixed(1)}), dead ${k(w.deadTuples)}, purged ${k(w.purgedEvents)}; ` +
    `p50/p99 ${ms(w.p50Ms)}/${ms(w.p99Ms)} ms; ${w.eventsPerS.toFixed(0)} events/s, backlog ${k(w.backlog)}; ` +
    `CPU/event node ${ms(w.nodeCpuPerEventMs)} + relay pg ${ms(w.relayBackendCpuPerEventMs)} ` +
    `(+ producer pg ${ms(w.producerBackendCpuPerEventMs)}) ms; claim ${ms(w.claimMeanMs)} ms × ${w.claimCalls ?? 'n/a'}, ` +
    `due scan ${ms(w.dueScanMeanMs)} ms; RSS ${(w.rssBytes / MiB).toFixed(0)} MiB; ` +
    `this process ${(w.nodeCores * 100).toFixed(0)}% of a core, load average ${w.loadAverage.toFixed(1)}${w.heldS > 0 ? ` [held ${w.heldS.toFixed(0)} s]` : ''}`
  );
}

function reportHold(
  context: BenchContext,
  effect: NonNullable<ReturnType<typeof holdEffect>>,
  calls: readonly DoctorCall[],
  span: { startS: number; endS: number },
): void {
  const { report } = context;
  const { before, worst, after } = effect;
  report.note(
    `hold ${span.startS.toFixed(0)}–${span.endS.toFixed(0)} s: window ${before.index + 1} (before) against window ` +
      `${worst.index + 1} (held, the worst claim)${after ? ` and window ${after.index + 1} (the first after)` : ''}`,
  );
  const line = (
    label: string,
    value: number | null,
    versus: number | null,
    unit: string,
    target?: number,
  ): void => {
    if (value === null || versus === null) return;
    report.add({
      scenario: 'soak',
      label,
      value,
      unit,
      versus: { label: 'before the hold', value: versus },
      goal: target === undefined ? undefined : { on: 'ratio', op: '<=', target },
    });
  };
  // issue 39's goals, judged on the held window
  line('held: claim mean execution per call (issue 39)', worst.claimMeanMs, before.claimMeanMs, 'ms', 2);
  line('held: commit → handler p99 (issue 39)', worst.p99Ms, before.p99Ms, 'ms', 2);
  line(
    'held: relay CPU per event, node + relay pg (issue 39)',
    worst.nodeCpuPerEventMs + (worst.relayBackendCpuPerEventMs ?? 0),
    before.nodeCpuPerEventMs + (before.relayBackendCpuPerEventMs ?? 0),
    'ms',
    1.2,
  );
  line('held: dead tuples of the outbox tables', worst.deadTuples, before.deadTuples, '');
  line('held: due-tenant scan per call', worst.dueScanMeanMs, before.dueScanMeanMs, 'ms');
  if (after) {
    line('after the hold: claim mean execution per call', after.claimMeanMs, before.claimMeanMs, 'ms');
    line('after the hold: commit → handler p99', after.p99Ms, before.p99Ms, 'ms');
  }
  const during = calls.filter((c) => c.holding);
  const named = during.filter((c) => c.namesHolder).length;
  report.note(
    `doctor during the hold: named the holder in ${named} of ${during.length} calls` +
      (during.find((c) => c.holderSummary)?.holderSummary
        ? ` — "${during.find((c) => c.holderSummary)!.holderSummary}"`
        : ''),
  );
  const beforeCall = calls.find((c) => !c.holding);
  if (beforeCall)
    report.note(
      `doctor before the hold: ${beforeCall.problems.length === 0 ? 'nothing to report' : beforeCall.problems.join(' | ')}`,
    );
}

async function writeOutcome(
  context: BenchContext,
  outcome: Record<string, unknown>,
  windows: readonly SoakWindow[],
  hold: { startS: number; endS: number } | null,
): Promise<void> {
  const { report, options } = context;
  const dir = options.soak.outDir;
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const base = join(
    dir,
    `soak-${stamp}${options.soak.holdSeconds > 0 ? `-hold${options.soak.holdSeconds}` : ''}`,
  );
  writeFileSync(`${base}.json`, `${JSON.stringify(outcome, null, 2)}\n`);
  const svg = soakPlots(windows, hold);
  writeFileSync(`${base}.svg`, svg);
  const { width, height } = svgSize(svg);
  const problem = await renderPng(svg, width, height, `${base}.png`);
  report.note(`data: ${base}.json; plots: ${base}.svg${problem ? '' : ` and ${base}.png`}`);
  if (problem) report.note(`WARNING ${problem}`);
}
