/**
 * What one `relay.drain()` of a loaded backlog costs: its rate, CPU per event of this process (Node, user + system)
 * and of the app's PostgreSQL backends (from /proc), and statements per event (pg_stat_statements, when the
 * caller turned it on). Shared by the scenarios that compare drains side by side and the decision scripts.
 */
import type { BenchApp } from './bench-app';
import type { BenchDatabase } from './bench-database';
import { cpuSpentMs, readBackendCpu } from './backend-cpu';
import type { StatementStats } from './statement-stats';
import { now } from './stats';

/** What one `drain()` cost: events per second, CPU per event of Node and of the app's backends (µs), statements. */
export interface DrainFigures {
  eventsPerSecond: number;
  nodeUs: number;
  /** NaN when the server's processes cannot be read (a server on another machine). */
  serverUs: number;
  /** Statements the server ran per event; NaN without `stats` (or pg_stat_statements). */
  statements: number;
}

/**
 * One `app.relay.drain()` of the `events` pending events of `db`, failing unless it claims them all: its rate, and
 * CPU per event of the Node process and of the backends named `applicationName` (NaN when the server is remote);
 * with `stats`, the statements it counted per event (reset after the pool's connections are open).
 */
export async function measureDrain(
  app: BenchApp,
  db: BenchDatabase,
  applicationName: string,
  events: number,
  stats?: StatementStats,
): Promise<DrainFigures> {
  const query = db.sql.bind(db) as Parameters<typeof readBackendCpu>[0];
  // the pool's connections, open before the clock starts (their backends are what is counted)
  await Promise.all(Array.from({ length: 4 }, () => app.dataSource.query('select 1')));
  await stats?.reset();
  const cpuBefore = await readBackendCpu(query, [applicationName]);
  const nodeBefore = process.cpuUsage();
  const began = now();
  const drained = await app.relay.drain();
  const ms = now() - began;
  const node = process.cpuUsage(nodeBefore);
  const postgresMs = cpuSpentMs(cpuBefore, await readBackendCpu(query, [applicationName]));
  if (drained.eventsClaimed !== events)
    throw new Error(`drained ${drained.eventsClaimed} of ${events} events`);
  const reading = await stats?.read(0);
  return {
    eventsPerSecond: (events * 1000) / ms,
    nodeUs: (node.user + node.system) / events,
    serverUs: postgresMs === null ? Number.NaN : (postgresMs * 1000) / events,
    statements: reading ? reading.calls / events : Number.NaN,
  };
}
