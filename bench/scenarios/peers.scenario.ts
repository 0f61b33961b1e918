/**
 * 7. Peers. The library beside graphile-worker, pg-boss and pg-transactional-outbox on the same work, the same
 * server and the same run, taking turns, with a raw-SQL reference on every line: enqueue in a business
 * transaction (1 and 8 connections; raw INSERT), draining a backlog with two no-op consumers, with one consumer
 * writing a row and with each consumer writing one (raw batched relay), and commit → handler latency at a fixed
 * rate (raw NOTIFY-woken relay), and the lateness of delayed events beside graphile-worker's `run_at` and pg-boss's
 * `startAfter`. Every line gives each system's rate and its CPU per unit of work, Node +
 * PostgreSQL, and library / other ratios against the goals of issue 35. Each peer runs with the settings its
 * docs recommend for throughput and latency (printed), the library with its defaults.
 *
 * With `--loaded`, every line runs again under a fixed background CPU load on every core (`harness/
 * background-load.ts`), started before the lines and stopped after them, labelled "(loaded)". The lines are in
 * `peers/enqueue-lines.ts`, `peers/drain-lines.ts`, `peers/latency-lines.ts` and `peers/delayed-lines.ts`; the peers' tuning and adapters
 * in `bench/peers/`; the report lines in `harness/peers-report.ts`.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { BackgroundLoad, type DutyCycle } from '../harness/background-load';
import { RELAY_POLICY_ENV } from '../harness/bench-app';
import type { PeersLineName } from '../harness/bench-options';
import type { BenchScenario } from '../harness/bench-scenario';
import { StatementStats } from '../harness/statement-stats';
import { PEERS } from '../peers/peers';
import { delayedLines } from './peers/delayed-lines';
import { drainLines } from './peers/drain-lines';
import { enqueueLines } from './peers/enqueue-lines';
import { latencyLines } from './peers/latency-lines';
import type { PeersRun } from './peers/peers-run';

/**
 * The loaded variant's load: half of every core, in cycles short beside a drain and long beside a commit, so
 * that a system finds a core busy at random moments rather than one core gone for the whole run.
 */
const LOAD: DutyCycle = { busyMs: 10, idleMs: 10 };

async function allLines(run: PeersRun): Promise<void> {
  const seconds: string[] = [];
  const timed = async (what: PeersLineName, lines: (run: PeersRun) => Promise<void>): Promise<void> => {
    if (!run.context.options.peersLines.includes(what)) return;
    const began = Date.now();
    await lines(run);
    seconds.push(`${what} ${((Date.now() - began) / 1000).toFixed(0)} s`);
  };
  await timed('enqueue', enqueueLines);
  await timed('drains', drainLines);
  await timed('latency', latencyLines);
  await timed('delayed', delayedLines);
  run.context.report.note(`${run.tag ? 'loaded' : 'idle'} lines took ${seconds.join(', ')}`);
}

export const peersScenario: BenchScenario = {
  name: 'peers',
  title:
    'Peers: graphile-worker, pg-boss, pg-transactional-outbox and raw SQL on the same work (goals: rates ≥ the ' +
    'named peer, enqueue ≥ 0.90× raw; CPU per unit, Node + PostgreSQL: enqueue ≤ 1.15× raw and Node within ' +
    '30 µs of raw, no-op drain ≤ graphile-worker, writing-all drain ≤ pg-boss and ≤ 1.5× raw relay, latency ≤ ' +
    'raw relay; p50 ≤ graphile-worker; p99 ≤ raw relay; delayed lateness p99 ≤ the best peer)',
  async run(context) {
    const { db, report, options } = context;
    for (const peer of PEERS) {
      await peer.uninstall(db);
      await peer.install(db);
      report.note(`${peer.name} ${peer.version}: ${peer.settings}; fan-out: ${peer.fanOut}`);
    }
    report.note(
      `library: defaults (OutboxModule.forRoot, batch ${OUTBOX_DEFAULTS.relay.batchSize}, growing to ` +
        `${OUTBOX_DEFAULTS.relay.maxBatchSize} while handlers write nothing, ` +
        `concurrency ${OUTBOX_DEFAULTS.relay.concurrency}: 2 batches at once on its pool of 10); ` +
        `each system in its own schema of ${db.name}; ${options.sizes.peersRounds} round(s) per line, ` +
        'systems in turns (forward, then backward); medians, ranges over rounds',
    );
    report.note(
      'CPU per unit of work: Node (the process doing the system’s work, user + system, nothing subtracted: ' +
        'in-process lines carry the same harness for every system) + PostgreSQL (its backends, from /proc, ' +
        'by application_name) = total, of the round with the median total',
    );
    const switches = process.env[RELAY_POLICY_ENV]?.trim();
    if (switches) report.note(`library: relay policy switched by ${RELAY_POLICY_ENV}: ${switches}`);
    const stats = await StatementStats.enable(db);
    if (!stats.available) report.note(`statement counts unavailable: ${stats.reason}`);
    try {
      await allLines({ context, stats, tag: '' });
      if (options.loaded) {
        report.note(`(loaded): background load ${BackgroundLoad.describe(LOAD)}, for every line below`);
        const load = BackgroundLoad.start(LOAD);
        try {
          await allLines({ context, stats, tag: ' (loaded)' });
        } finally {
          await load.stop();
        }
      }
    } finally {
      await stats.disable();
      for (const peer of PEERS) await peer.uninstall(db);
    }
  },
};
