/** Messages between the bench and a relay worker process (`relay-worker.ts`), over the IPC channel of `fork`. */
import type { ConsumerVariant } from '../harness/bench-consumers';

/** Which relay a worker runs. */
export type RelayKind = 'library' | 'raw-batched' | 'raw-per-event';

/** A worker's configuration, passed as JSON in `BENCH_RELAY_WORKER`. */
export interface RelayWorkerConfig {
  url: string;
  kind: RelayKind;
  variant: ConsumerVariant;
  batchSize: number;
  /** With `sampleMemory`: the events this worker will drain, to record RSS at each quarter of them. */
  expectedEvents: number;
  sampleMemory: boolean;
}

/** RSS of the worker while it drained. */
export interface MemoryProfile {
  /** After boot, before the first round. */
  startRssBytes: number;
  /** Highest RSS seen by sampling every 20 ms. */
  peakRssBytes: number;
  /** The kernel's high-water mark of the process (`VmHWM`), when /proc is there. */
  vmHwmBytes: number | null;
  /**
   * When 25%, 50%, 75% and 100% of the expected events were relayed, right after a full garbage collection (so
   * that growth means memory kept, not garbage not yet collected): RSS and the V8 heap in use.
   */
  atProgress: { progress: number; rssBytes: number; heapUsedBytes: number }[];
}

/** CPU time spent while draining, in milliseconds. */
export interface CpuProfile {
  /** The worker process (user + system). */
  nodeMs: number;
  /**
   * Its PostgreSQL backends (user + system, from /proc), or null when the server's processes cannot be read
   * (a server on another machine).
   */
  postgresMs: number | null;
}

export interface RelayWorkerResult {
  events: number;
  elapsedMs: number;
  memory: MemoryProfile | null;
  cpu: CpuProfile;
}

export type ToWorker = { type: 'go' };
export type FromWorker =
  { type: 'ready' } | { type: 'done'; result: RelayWorkerResult } | { type: 'failed'; error: string };

export const WORKER_CONFIG_ENV = 'BENCH_RELAY_WORKER';
