/** The shape every scenario file exports, and what it is given to run. */
import type { BenchDatabase } from './bench-database';
import type { BenchOptions, ScenarioName } from './bench-options';
import type { BenchReport } from './report';
import type { WalFlushCounter } from './server-info';

export interface BenchContext {
  db: BenchDatabase;
  options: BenchOptions;
  report: BenchReport;
  flushes: WalFlushCounter;
}

export interface BenchScenario {
  name: ScenarioName;
  /** Section title, with the goals it checks. */
  title: string;
  run(context: BenchContext): Promise<void>;
}
