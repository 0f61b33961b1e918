/**
 * The soak's figures, window by window: what the scenario reads at each window's end (counters), what a window
 * is (the differences between two readings, and the latencies of the events handled in it), and the goals as
 * ratios of the last window to the first once retention has cycled. Pure: the scenario does the reading.
 */
import { median, percentile } from './stats';

/** Counters read at a window's boundary; a window is the difference between two of them. */
export interface SoakReading {
  /** Seconds since the load began. */
  atS: number;
  /** Bytes of the outbox tables (heap, TOAST) and of their indexes, by table. */
  tables: Record<
    string,
    { tableBytes: number; indexBytes: number; deadTuples: number; deletedTuples: number }
  >;
  /** Events committed so far by the producer. */
  produced: number;
  /** Events handled so far by the consumer that times them. */
  handled: number;
  /** CPU of this process (user + system), ms. */
  nodeCpuMs: number;
  /** CPU of the relay's and of the producer's PostgreSQL backends, ms, or null where /proc cannot show them. */
  relayBackendCpuMs: number | null;
  producerBackendCpuMs: number | null;
  rssBytes: number;
  /** The machine's load average over the last minute. */
  loadAverage: number;
  /** Claims (new events and due retries) and due-tenant scans from pg_stat_statements, or null without it. */
  claims: { calls: number; execMs: number } | null;
  dueScans: { calls: number; execMs: number } | null;
  /**
   * Every statement so far by pg_stat_statements' `queryid` (those run inside the library's functions too), or
   * null without it (absent: not read).
   */
  statements?: Record<string, StatementCounters> | null;
  /**
   * The relay's claims of new events that took the fan-out so far, by reason (`outbox_relay_fan_outs_total`,
   * see `FanOutReason`); absent: not read.
   */
  fanOuts?: Record<string, number>;
}

/** One statement's counters in pg_stat_statements: calls, execution ms, shared buffers hit + read; its text's start. */
export interface StatementCounters {
  query: string;
  calls: number;
  execMs: number;
  buffers: number;
}

/** How many statements a window lists (the costliest by execution time). */
const WINDOW_STATEMENTS = 8;

/** One window of the run. */
export interface SoakWindow {
  index: number;
  startS: number;
  endS: number;
  /** Outbox tables and their indexes at the window's end. */
  tableBytes: number;
  indexBytes: number;
  sizeBytes: number;
  /** Dead tuples of the outbox tables at the window's end, all and by table. */
  deadTuples: number;
  deadByTable: Record<string, number>;
  /** Events retention deleted from the events table during the window. */
  purgedEvents: number;
  /**
   * Partitioned layout: the events table's ranges at the window's end, and those made and dropped during the
   * window (0 on the unpartitioned layout). A dropped range is retention's work there: it deletes no row.
   */
  ranges: number;
  rangesMade: number;
  rangesDropped: number;
  /** Commit → handler latency of the events handled in the window. */
  latencyCount: number;
  p50Ms: number;
  p99Ms: number;
  /** Events the relay handled per second. */
  eventsPerS: number;
  /** Events committed and not yet handled at the window's end: a relay that keeps up keeps it small. */
  backlog: number;
  /** CPU per handled event: this process (producer and relay), the relay's backends, the producer's. */
  nodeCpuPerEventMs: number;
  relayBackendCpuPerEventMs: number | null;
  producerBackendCpuPerEventMs: number | null;
  /** Cores this process used over the window (its CPU over the window's length): on a shared machine, its share. */
  nodeCores: number;
  rssBytes: number;
  loadAverage: number;
  /** Mean execution per call, ms (null without pg_stat_statements, or no call in the window). */
  claimMeanMs: number | null;
  claimCalls: number | null;
  dueScanMeanMs: number | null;
  /** The window's costliest statements by execution time (empty without pg_stat_statements). */
  statements: StatementCounters[];
  /** Seconds of the window during which the snapshot was held. */
  heldS: number;
  /** The relay's fan-outs in the window by reason, those that happened only (null: not read). */
  fanOuts: Record<string, number> | null;
}

/** The events table: retention's deletes are counted there (one per purged event), in its partitions if any. */
export const EVENTS_TABLE = 'event_outbox';

/** The events table and its partitions (`event_outbox_<range>`, `event_outbox_default`). */
function isEventsTable(name: string): boolean {
  return name === EVENTS_TABLE || name.startsWith(`${EVENTS_TABLE}_`);
}

/** A range partition of the events table: `event_outbox_p<yyyymmdd>t<hhmi>` (docs/partitioning.md). */
const EVENTS_RANGE = new RegExp(`^${EVENTS_TABLE}_p[0-9]{8}t[0-9]{4}$`);

/**
 * Rows deleted from the events table and its partitions between two readings: a partition's counter from the
 * reading before (from 0 when it was made in between); a partition dropped in between takes its count with it.
 */
function eventsDeleted(before: SoakReading, after: SoakReading): number {
  return Object.entries(after.tables)
    .filter(([name]) => isEventsTable(name))
    .reduce((sum, [name, t]) => sum + t.deletedTuples - (before.tables[name]?.deletedTuples ?? 0), 0);
}

function eventsRanges(reading: SoakReading): Set<string> {
  return new Set(Object.keys(reading.tables).filter((name) => EVENTS_RANGE.test(name)));
}

/** A window from two readings, the latencies of the events handled between them, and the hold's span if any. */
export function soakWindow(
  index: number,
  before: SoakReading,
  after: SoakReading,
  latenciesMs: readonly number[],
  hold: { startS: number; endS: number } | null,
): SoakWindow {
  const seconds = after.atS - before.atS;
  const handled = after.handled - before.handled;
  const perEvent = (spent: number | null): number | null =>
    spent === null || handled <= 0 ? null : spent / handled;
  const diff = (a: number | null, b: number | null): number | null =>
    a === null || b === null ? null : a - b;
  const tables = Object.entries(after.tables);
  const tableBytes = tables.reduce((sum, [, t]) => sum + t.tableBytes, 0);
  const indexBytes = tables.reduce((sum, [, t]) => sum + t.indexBytes, 0);
  const claims = after.claims && before.claims ? delta(after.claims, before.claims) : null;
  const due = after.dueScans && before.dueScans ? delta(after.dueScans, before.dueScans) : null;
  const purged = eventsDeleted(before, after);
  const rangesBefore = eventsRanges(before);
  const rangesAfter = eventsRanges(after);
  return {
    index,
    startS: before.atS,
    endS: after.atS,
    tableBytes,
    indexBytes,
    sizeBytes: tableBytes + indexBytes,
    deadTuples: tables.reduce((sum, [, t]) => sum + t.deadTuples, 0),
    deadByTable: Object.fromEntries(tables.map(([name, t]) => [name, t.deadTuples])),
    purgedEvents: purged,
    ranges: rangesAfter.size,
    rangesMade: [...rangesAfter].filter((name) => !rangesBefore.has(name)).length,
    rangesDropped: [...rangesBefore].filter((name) => !rangesAfter.has(name)).length,
    latencyCount: latenciesMs.length,
    p50Ms: percentile(latenciesMs, 50),
    p99Ms: percentile(latenciesMs, 99),
    eventsPerS: seconds > 0 ? handled / seconds : Number.NaN,
    backlog: Math.max(0, after.produced - after.handled),
    nodeCpuPerEventMs: perEvent(after.nodeCpuMs - before.nodeCpuMs) ?? Number.NaN,
    relayBackendCpuPerEventMs: perEvent(diff(after.relayBackendCpuMs, before.relayBackendCpuMs)),
    producerBackendCpuPerEventMs: perEvent(diff(after.producerBackendCpuMs, before.producerBackendCpuMs)),
    nodeCores: seconds > 0 ? (after.nodeCpuMs - before.nodeCpuMs) / (seconds * 1000) : Number.NaN,
    rssBytes: after.rssBytes,
    loadAverage: after.loadAverage,
    claimMeanMs: claims && claims.calls > 0 ? claims.execMs / claims.calls : null,
    claimCalls: claims?.calls ?? null,
    dueScanMeanMs: due && due.calls > 0 ? due.execMs / due.calls : null,
    statements: statementsBetween(before.statements ?? null, after.statements ?? null),
    heldS: hold ? overlap(before.atS, after.atS, hold.startS, hold.endS) : 0,
    fanOuts: after.fanOuts ? countsBetween(before.fanOuts ?? {}, after.fanOuts) : null,
  };
}

/** Each counter's growth between two readings, those that grew only. */
function countsBetween(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([key, n]): [string, number] => [key, n - (before[key] ?? 0)])
      .filter(([, n]) => n > 0),
  );
}

function delta(
  after: { calls: number; execMs: number },
  before: { calls: number; execMs: number },
): { calls: number; execMs: number } {
  return { calls: after.calls - before.calls, execMs: after.execMs - before.execMs };
}

/** What each statement ran between two readings, the costliest by execution time first. */
function statementsBetween(
  before: Record<string, StatementCounters> | null,
  after: Record<string, StatementCounters> | null,
): StatementCounters[] {
  if (!after) return [];
  return Object.entries(after)
    .map(([id, a]) => {
      const b = before?.[id];
      return {
        query: a.query,
        calls: a.calls - (b?.calls ?? 0),
        execMs: a.execMs - (b?.execMs ?? 0),
        buffers: a.buffers - (b?.buffers ?? 0),
      };
    })
    .filter((s) => s.calls > 0)
    .sort((x, y) => y.execMs - x.execMs)
    .slice(0, WINDOW_STATEMENTS);
}

function overlap(a0: number, a1: number, b0: number, b1: number): number {
  return Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
}

/** A goal of the soak: the last window's figure over the reference window's. */
export interface SoakGoal {
  label: string;
  unit: string;
  first: number;
  last: number;
  ratio: number;
  op: '<=' | '>=';
  target: number;
  met: boolean;
}

/** The goals of issue 37 and the windows they compare, or why they cannot be judged. */
export type SoakVerdict =
  | { judged: true; first: SoakWindow; last: SoakWindow; goals: SoakGoal[] }
  | { judged: false; reason: string };

/**
 * The reference window is the first that begins after the first window in which retention deleted events or
 * dropped a range (the tables have then reached the size they keep); the last is the run's last. Size ≤ 1.1×,
 * p99 ≤ 1.2×, throughput ≥ 0.9× (issue 37).
 */
export function judgeSoak(windows: readonly SoakWindow[]): SoakVerdict {
  const cycled = windows.findIndex((w) => w.purgedEvents > 0 || w.rangesDropped > 0);
  if (cycled === -1)
    return {
      judged: false,
      reason:
        'retention never deleted an event nor dropped a range: lengthen the run, shorten retention, or (partitioned layout) narrow the ranges with --range-minutes',
    };
  const first = windows[cycled + 1];
  const last = windows[windows.length - 1]!;
  if (!first || first === last)
    return {
      judged: false,
      reason: `retention first deleted events in window ${cycled + 1} of ${windows.length}: too late to leave two windows to compare; lengthen the run`,
    };
  const goal = (
    label: string,
    unit: string,
    a: number,
    b: number,
    op: '<=' | '>=',
    target: number,
  ): SoakGoal => {
    const ratio = b / a;
    const met = Number.isFinite(ratio) && (op === '<=' ? ratio <= target : ratio >= target);
    return { label, unit, first: a, last: b, ratio, op, target, met };
  };
  return {
    judged: true,
    first,
    last,
    goals: [
      goal('outbox tables + indexes size', 'MiB', mib(first.sizeBytes), mib(last.sizeBytes), '<=', 1.1),
      goal('commit → handler p99', 'ms', first.p99Ms, last.p99Ms, '<=', 1.2),
      goal('relay throughput', 'events/s', first.eventsPerS, last.eventsPerS, '>=', 0.9),
    ],
  };
}

function mib(bytes: number): number {
  return bytes / (1024 * 1024);
}

/** The figures issue 39's goals compare: a window's, or the medians of several. */
export interface HoldFigures {
  claimMeanMs: number | null;
  p99Ms: number;
  /** Relay CPU per handled event: this process plus the relay's backends. */
  cpuPerEventMs: number;
  deadTuples: number;
  dueScanMeanMs: number | null;
}

/**
 * What the windows held under the snapshot show against the minutes before the hold, and whether the end recovered.
 * "Before" is the median of the unheld windows before the hold but the first (which holds the relay's warm-up and
 * retention's first cycle), or the one window there is: a single minute's p99 on a shared 2-core machine moves by
 * up to 3× from one minute to the next, so one window is not a steady value to compare with.
 */
export interface HoldEffect {
  /** The windows whose medians make `before`. */
  beforeWindows: SoakWindow[];
  before: HoldFigures;
  /** The last held window: the end of the hold, when the dead rows it kept are the most (issue 39's moment). */
  end: SoakWindow;
  /** The held window with the highest claim mean (or p99 without pg_stat_statements). */
  worst: SoakWindow;
  /** The first window entirely after the hold. */
  after: SoakWindow | null;
}

export function holdFigures(w: SoakWindow): HoldFigures {
  return {
    claimMeanMs: w.claimMeanMs,
    p99Ms: w.p99Ms,
    cpuPerEventMs: w.nodeCpuPerEventMs + (w.relayBackendCpuPerEventMs ?? 0),
    deadTuples: w.deadTuples,
    dueScanMeanMs: w.dueScanMeanMs,
  };
}

export function holdEffect(windows: readonly SoakWindow[]): HoldEffect | null {
  // a window whose reading came a few ms after the hold began (the hold starting on its boundary) is not held
  const isHeld = (w: SoakWindow): boolean => w.heldS >= 1;
  const firstHeld = windows.findIndex(isHeld);
  if (firstHeld <= 0) return null;
  const held = windows.filter(isHeld);
  const key = (w: SoakWindow): number => w.claimMeanMs ?? w.p99Ms;
  const worst = held.reduce((a, b) => (key(b) > key(a) ? b : a));
  const end = held[held.length - 1]!;
  const beforeWindows = windows.slice(firstHeld > 1 ? 1 : 0, firstHeld);
  const figures = beforeWindows.map(holdFigures);
  const mid = (pick: (f: HoldFigures) => number | null): number | null => {
    const values = figures.map(pick).filter((v): v is number => v !== null && Number.isFinite(v));
    return values.length === 0 ? null : median(values);
  };
  const before: HoldFigures = {
    claimMeanMs: mid((f) => f.claimMeanMs),
    p99Ms: mid((f) => f.p99Ms) ?? Number.NaN,
    cpuPerEventMs: mid((f) => f.cpuPerEventMs) ?? Number.NaN,
    deadTuples: mid((f) => f.deadTuples) ?? Number.NaN,
    dueScanMeanMs: mid((f) => f.dueScanMeanMs),
  };
  return { beforeWindows, before, end, worst, after: windows[end.index + 1] ?? null };
}
