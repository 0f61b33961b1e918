/** What the peers scenario's three measurements share: the run they belong to and each system's fresh start. */
import type { BenchContext } from '../../harness/bench-scenario';
import type { System } from '../../harness/peers-report';
import type { StatementStats } from '../../harness/statement-stats';
import { PEERS } from '../../peers/peers';

/** One pass over every line: on an idle machine, or under the background load. */
export interface PeersRun {
  context: BenchContext;
  stats: StatementStats;
  /** `''` idle; ` (loaded)` under the background load, appended to every label. */
  tag: string;
}

/** `application_name` of a system's in-process connections, to find its backends. */
export function applicationName(system: System): string {
  return `bench-peers-${system}`;
}

/** A fresh start for every system's tables: the bench's own and each peer's. */
export async function resetAll(context: BenchContext): Promise<void> {
  await context.db.truncate();
  for (const peer of PEERS) await peer.reset(context.db);
  await context.db.checkpoint();
}
