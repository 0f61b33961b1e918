/** Command-line flags of `npm run bench` and the sizes they select. */
import type { BenchLayout } from './bench-database';

/** Scenario names accepted by `--only`. */
export const SCENARIO_NAMES = [
  'enqueue',
  'relay',
  'latency',
  'scale',
  'memory',
  'round-trips',
  'peers',
  'soak',
  'fairness',
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/** Line names of the peers scenario accepted by `--lines`. */
export const PEERS_LINE_NAMES = ['enqueue', 'drains', 'latency', 'delayed'] as const;
export type PeersLineName = (typeof PEERS_LINE_NAMES)[number];

/** How big each scenario runs. */
export interface BenchSizes {
  /** Timed seconds of each enqueue variant in all, in slices taken in turns with the other variants. */
  enqueueSeconds: number;
  /** Length of one such slice. */
  enqueueSliceMs: number;
  /** Seconds of each run that counts WAL flushes (one variant at a time). */
  enqueueFlushSeconds: number;
  /** Flush-counting runs per variant; the median is kept. */
  enqueueFlushRepeats: number;
  /** Transactions per WAL-bytes measurement of enqueue. */
  enqueueWalTransactions: number;
  /** Pending events drained by each relay-throughput run. */
  relayBacklog: number;
  /** Drains per side and instance count (raw and library in turns); the median is kept. */
  relayRepeats: number;
  /** Events produced per second by the latency producer. */
  latencyRate: number;
  /** Seconds the latency producer runs. */
  latencySeconds: number;
  /** Latency runs per side, in turns; their events are pooled. */
  latencyRepeats: number;
  /** Published events of history at each backlog-scale measurement, growing; the first is the small one. */
  scaleHistories: readonly number[];
  /** Timed `runOnce()` rounds per backlog size. */
  scaleRounds: number;
  /** Events drained by the memory scenario. */
  memoryEvents: number;
  /** Batch sizes at which round trips per batch are counted. */
  roundTripBatchSizes: readonly number[];
  /** Batches drained per round-trip measurement. */
  roundTripBatches: number;
  /** Peers: rounds of every line, the systems taking turns in each; medians and ranges over them. */
  peersRounds: number;
  /** Peers: timed seconds of each system's enqueue per round, in slices taken in turns. */
  peersEnqueueSeconds: number;
  /** Peers: events in each drained backlog (two consumers each). */
  peersBacklog: number;
  /** Peers: events per second and seconds of each latency run. */
  peersLatencyRate: number;
  peersLatencySeconds: number;
  /** Peers: delayed events per system and round, due 1 to 3 s after the enqueue started. */
  peersDelayedEvents: number;
  /** Soak: minutes of sustained load (`--minutes` overrides). */
  soakMinutes: number;
  /** Soak: seconds per window of figures. */
  soakWindowSeconds: number;
  /** Soak: settled events older than this many seconds are purged (the bench lowers the floor; see the scenario). */
  soakRetentionSeconds: number;
  /** Soak: how often retention runs, in ms (`retention.intervalMs`). */
  soakRetentionIntervalMs: number;
  /** Fairness: the big tenant's backlog while the small tenant's latency is measured. */
  fairnessBacklog: number;
  /** Fairness: the small tenant's events per second, and the most seconds it produces in each run. */
  fairnessRate: number;
  fairnessSeconds: number;
  /**
   * Fairness: the small tenant's runs per side (idle relay, backlogged, shares off), in turns; each side's p99 is the
   * median of its runs' p99s (odd: a middle run).
   */
  fairnessTurns: number;
  /** Fairness: the single-tenant drains and the limits' cost, twice this many drains per side, in turns. */
  fairnessRepeats: number;
  /** Fairness: the backlog of each of the two weighted tenants. */
  fairnessWeightedBacklog: number;
}

/** Soak settings that flags can change. */
export interface SoakFlags {
  /** Events enqueued per second (`--rate`). */
  rate: number;
  /** Minutes of load (`--minutes`); the size's default unless given. */
  minutes: number | null;
  /** Seconds a second connection holds a repeatable-read snapshot in the middle of the run (`--hold`); 0 for none. */
  holdSeconds: number;
  /** Where the run's JSON and plots go (`--out`). */
  outDir: string;
  /** Samples `pg_stat_activity` and says what each window's slowest events waited beside (`--activity`). */
  activity: boolean;
}

/** What the command line asked for. */
export interface BenchOptions {
  quick: boolean;
  /** Peers: run every line a second time under a fixed background CPU load on every core. */
  loaded: boolean;
  /** Print a JSON summary on stdout (the readable report then goes to stderr). */
  json: boolean;
  /** The outbox tables' layout in the bench database (`--layout`). */
  layout: BenchLayout;
  /**
   * BENCH ONLY (`--range-minutes`): the partitioned layout's ranges in minutes instead of days, below the library's
   * minimum of an hour (bench/harness/bench-floors.ts); null for the test suites' daily ranges.
   */
  rangeMinutes: number | null;
  /** Scenarios to run, in their fixed order. */
  scenarios: readonly ScenarioName[];
  /** Peers: the lines to run, in their fixed order (all unless `--lines` names some). */
  peersLines: readonly PeersLineName[];
  sizes: BenchSizes;
  soak: SoakFlags;
}

const FULL: BenchSizes = {
  enqueueSeconds: 6,
  enqueueSliceMs: 500,
  enqueueFlushSeconds: 2,
  enqueueFlushRepeats: 3,
  enqueueWalTransactions: 2000,
  relayBacklog: 50_000,
  relayRepeats: 2,
  latencyRate: 250,
  latencySeconds: 10,
  latencyRepeats: 2,
  scaleHistories: [10_000, 1_000_000, 10_000_000],
  scaleRounds: 50,
  memoryEvents: 200_000,
  roundTripBatchSizes: [10, 100, 500],
  roundTripBatches: 6,
  peersRounds: 3,
  // A full `--only=peers --loaded` (every line idle, then loaded) in 12–14 minutes on a shared 2-core machine.
  peersEnqueueSeconds: 1.5,
  peersBacklog: 8_000,
  peersLatencyRate: 100,
  peersLatencySeconds: 4,
  peersDelayedEvents: 1_000,
  soakMinutes: 30,
  soakWindowSeconds: 60,
  soakRetentionSeconds: 120,
  soakRetentionIntervalMs: 15_000,
  fairnessBacklog: 200_000,
  fairnessRate: 200,
  fairnessSeconds: 5,
  fairnessTurns: 3,
  fairnessRepeats: 2,
  fairnessWeightedBacklog: 40_000,
};

const QUICK: BenchSizes = {
  ...FULL,
  enqueueSeconds: 1,
  enqueueSliceMs: 250,
  enqueueFlushSeconds: 1,
  enqueueFlushRepeats: 1,
  enqueueWalTransactions: 500,
  relayBacklog: 5_000,
  relayRepeats: 1,
  latencySeconds: 3,
  latencyRepeats: 1,
  scaleHistories: [10_000, 100_000],
  scaleRounds: 20,
  memoryEvents: 20_000,
  roundTripBatches: 4,
  peersRounds: 1,
  peersEnqueueSeconds: 1,
  peersBacklog: 2_000,
  peersLatencySeconds: 3,
  peersDelayedEvents: 200,
  soakMinutes: 2,
  soakWindowSeconds: 15,
  soakRetentionSeconds: 20,
  soakRetentionIntervalMs: 5_000,
  fairnessBacklog: 50_000,
  fairnessSeconds: 2,
  fairnessTurns: 3,
  fairnessRepeats: 1,
  fairnessWeightedBacklog: 10_000,
};

/** Scenarios a bare `npm run bench` leaves out: they run only when `--only` names them. */
const ON_REQUEST: readonly ScenarioName[] = ['soak'];

const USAGE = `usage: npm run bench -- [--quick] [--loaded] [--json] [--only=${SCENARIO_NAMES.join(',')}]
  --quick   smaller sizes (about a minute): 5k backlog, 100k rows for scale, 20k events for memory, 50k (not 200k) for
            fairness; soak 2 minutes
  --loaded  peers: every line idle, then again under a fixed CPU load on every core (labelled "(loaded)")
  --json    JSON summary on stdout; the readable report goes to stderr
  --only    run only the named scenarios (comma-separated); soak runs only when named
  --layout=partitioned   the outbox tables converted to the partitioned layout (docs/partitioning.md), as the test
            suites' with OUTBOX_TEST_PARTITIONED=1 (default unpartitioned)
  --range-minutes=N   with --layout=partitioned: ranges of N minutes (1-59) from now, made ahead over 6 minutes at
            least, instead of daily ones (BENCH ONLY: the library's ranges are an hour wide at least), so that a
            soak's retention drops ranges
  --lines=${PEERS_LINE_NAMES.join(',')}   peers: run only the named lines (comma-separated)
  --minutes=N   soak: minutes of load (default 30, 2 with --quick)
  --rate=N      soak: events enqueued per second (default 400)
  --hold=S      soak: hold a repeatable-read snapshot open for S seconds in the middle of the run (default 0: none)
  --out=DIR     soak: where the run's JSON and plots go (default bench-output)
  --activity    soak: sample pg_stat_activity every 50 ms and say, per window, what the slowest 1% of events
                waited beside (retention's purge, autovacuum, the warm-up, lock waits)
  DATABASE_URL  use this server (a throwaway database is created on it) instead of an embedded PostgreSQL`;

/** Parses `process.argv.slice(2)`; throws the usage text on an unknown flag. */
export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  let quick = false;
  let loaded = false;
  let json = false;
  let layout: BenchLayout = 'unpartitioned';
  let rangeMinutes: number | null = null;
  let scenarios: ScenarioName[] = SCENARIO_NAMES.filter((n) => !ON_REQUEST.includes(n));
  let peersLines: PeersLineName[] = [...PEERS_LINE_NAMES];
  const soak: SoakFlags = {
    rate: 400,
    minutes: null,
    holdSeconds: 0,
    outDir: 'bench-output',
    activity: false,
  };
  for (const arg of argv) {
    if (arg === '--quick') quick = true;
    else if (arg.startsWith('--minutes=')) soak.minutes = positiveNumber(arg, 'a number of minutes above 0');
    else if (arg.startsWith('--rate=')) soak.rate = positiveNumber(arg, 'events per second above 0');
    else if (arg === '--activity') soak.activity = true;
    else if (arg.startsWith('--hold=')) soak.holdSeconds = positiveNumber(arg, 'a number of seconds above 0');
    else if (arg.startsWith('--out=') && arg.length > '--out='.length)
      soak.outDir = arg.slice('--out='.length);
    else if (arg.startsWith('--range-minutes=')) {
      rangeMinutes = positiveNumber(arg, 'a whole number of minutes from 1 to 59');
      if (!Number.isInteger(rangeMinutes) || rangeMinutes > 59)
        throw new Error(`${arg}: expected a whole number of minutes from 1 to 59\n${USAGE}`);
    } else if (arg === '--loaded') loaded = true;
    else if (arg === '--json') json = true;
    else if (arg === '--layout=partitioned' || arg === '--layout=unpartitioned')
      layout = arg.slice('--layout='.length) as BenchLayout;
    else if (arg.startsWith('--only=')) {
      const names = arg.slice('--only='.length).split(',').filter(Boolean);
      const unknown = names.filter((n) => !(SCENARIO_NAMES as readonly string[]).includes(n));
      if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(', ')}\n${USAGE}`);
      scenarios = SCENARIO_NAMES.filter((n) => names.includes(n));
    } else if (arg.startsWith('--lines=')) {
      const names = arg.slice('--lines='.length).split(',').filter(Boolean);
      const unknown = names.filter((n) => !(PEERS_LINE_NAMES as readonly string[]).includes(n));
      if (names.length === 0 || unknown.length > 0)
        throw new Error(`unknown peers line ${unknown.join(', ') || '(none named)'}\n${USAGE}`);
      peersLines = PEERS_LINE_NAMES.filter((n) => names.includes(n));
    } else throw new Error(`unknown argument "${arg}"\n${USAGE}`);
  }
  const sizes = quick ? QUICK : FULL;
  const minutes = soak.minutes ?? sizes.soakMinutes;
  if (soak.holdSeconds >= minutes * 60) {
    throw new Error(
      `--hold=${soak.holdSeconds} must be shorter than the soak's ${minutes} minutes (${minutes * 60} s): ` +
        `lengthen the run with --minutes or shorten the hold\n${USAGE}`,
    );
  }
  if (rangeMinutes !== null && layout !== 'partitioned')
    throw new Error(`--range-minutes=${rangeMinutes} needs --layout=partitioned\n${USAGE}`);
  return { quick, loaded, json, layout, rangeMinutes, scenarios, peersLines, sizes, soak };
}

function positiveNumber(arg: string, expected: string): number {
  const text = arg.slice(arg.indexOf('=') + 1);
  const value = Number(text);
  if (text === '' || !Number.isFinite(value) || value <= 0)
    throw new Error(`${arg.slice(0, arg.indexOf('='))} must be ${expected}, got "${text}"\n${USAGE}`);
  return value;
}
