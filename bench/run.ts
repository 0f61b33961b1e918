/**
 * `npm run bench`: sets up a throwaway database (on an embedded PostgreSQL, or on DATABASE_URL), runs every
 * scenario of issue 5 beside a raw-SQL baseline in the same run, prints one line per figure with its ratio to
 * the baseline and the goal, and with `--json` a JSON summary on stdout. See `harness/bench-options.ts`.
 */
import 'reflect-metadata';
import { resolveDatabase } from '../tools/database-url';
import { BenchDatabase } from './harness/bench-database';
import { parseBenchOptions, type BenchOptions } from './harness/bench-options';
import type { BenchScenario } from './harness/bench-scenario';
import { BenchReport } from './harness/report';
import { describeEnvironment, WalFlushCounter } from './harness/server-info';
import { enqueueScenario } from './scenarios/enqueue.scenario';
import { relayThroughputScenario } from './scenarios/relay-throughput.scenario';
import { latencyScenario } from './scenarios/latency.scenario';
import { backlogScaleScenario } from './scenarios/backlog-scale.scenario';
import { memoryScenario } from './scenarios/memory.scenario';
import { roundTripsScenario } from './scenarios/round-trips.scenario';
import { peersScenario } from './scenarios/peers.scenario';
import { soakScenario } from './scenarios/soak.scenario';
import { fairnessScenario } from './scenarios/fairness.scenario';

const SCENARIOS: readonly BenchScenario[] = [
  enqueueScenario,
  relayThroughputScenario,
  latencyScenario,
  backlogScaleScenario,
  memoryScenario,
  roundTripsScenario,
  peersScenario,
  soakScenario,
  fairnessScenario,
];

async function main(options: BenchOptions): Promise<void> {
  const write = (line: string): void =>
    void (options.json ? process.stderr : process.stdout).write(`${line}\n`);
  const server = await resolveDatabase({
    settings: { ...statementStatsSettings(options), ...soakSettings(options) },
  });
  let db: BenchDatabase | null = null;
  // Ctrl-C: drop what we created and stop the embedded server before going (its watchdog is the last resort).
  const interrupt = (): void => {
    write('interrupted: cleaning up');
    cleanUp()
      .catch((error: unknown) => write(`could not clean up: ${String(error)}`))
      .finally(() => process.exit(130));
  };
  const cleanUp = async (): Promise<void> => {
    await db?.drop().catch((error: unknown) => write(`could not drop the bench database: ${String(error)}`));
    db = null;
    await server.stop();
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  try {
    db = await BenchDatabase.create(server.url, options.layout, options.rangeMinutes);
    const flushes = await WalFlushCounter.detect(db);
    const source = server.embedded ? 'embedded, started for this run' : 'DATABASE_URL';
    const environment = await describeEnvironment(db, source, flushes);
    const report = new BenchReport(write);
    report.header(
      `outbox bench${options.quick ? ' --quick' : ''}${options.loaded ? ' --loaded' : ''}${
        options.layout === 'partitioned' ? ' --layout=partitioned' : ''
      }${options.rangeMinutes !== null ? ` --range-minutes=${options.rangeMinutes}` : ''} — ${new Date().toISOString()}`,
      {
        ...environment.facts,
        quick: options.quick,
        loaded: options.loaded,
        layout: options.layout,
        rangeMinutes: options.rangeMinutes,
        scenarios: options.scenarios,
      },
      [
        ...environment.lines,
        `database ${db.name}; every figure: library (left) vs baseline of the same run (right), ratio = left / right`,
      ],
    );
    for (const scenario of SCENARIOS.filter((s) => options.scenarios.includes(s.name))) {
      report.section(scenario.title);
      const began = Date.now();
      await scenario.run({ db, options, report, flushes });
      report.note(`${scenario.name} took ${((Date.now() - began) / 1000).toFixed(1)} s`);
    }
    const summary = report.finish();
    if (options.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  } finally {
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
    await cleanUp();
  }
}

/**
 * The peers and fairness scenarios count statements with pg_stat_statements, the soak times the claim with it:
 * loaded at start (it cannot be later), but tracking nothing unless a scenario turns it on for its database, so
 * the other scenarios (and the fairness lines that do not count) do not pay for it.
 */
function statementStatsSettings(options: BenchOptions): Record<string, string> | undefined {
  const counting = ['peers', 'soak', 'fairness'] as const;
  if (!counting.some((name) => options.scenarios.includes(name))) return undefined;
  return { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'none' };
}

/**
 * The quick soak compresses time: retention of 20 s instead of days, so autovacuum wakes every 10 s instead of
 * every minute, or the two-minute run would see one vacuum at most. The full soak keeps the server's default.
 */
function soakSettings(options: BenchOptions): Record<string, string> | undefined {
  if (!options.scenarios.includes('soak') || !options.quick) return undefined;
  return { autovacuum_naptime: '10s' };
}

let options: BenchOptions;
try {
  options = parseBenchOptions(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
}
main(options).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
