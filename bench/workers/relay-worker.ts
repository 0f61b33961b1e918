/**
 * A relay in a process of its own (one Node event loop per relay instance, as in production): boots, says
 * `ready`, drains the backlog on `go`, reports `done` with its count, time and memory, and exits.
 * Started by `harness/relay-workers.ts`; configured by the JSON in `BENCH_RELAY_WORKER`.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { Client } from 'pg';
import { performance } from 'node:perf_hooks';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT } from '../harness/bench-database';
import { CONSUMER_NAMES, consumerClass } from '../harness/bench-consumers';
import { runBatchedRound, type RawRelayPlan } from '../raw/batched-relay';
import { runPerEventRound } from '../raw/per-event-relay';
import { RawSession } from '../raw/raw-session';
import {
  WORKER_CONFIG_ENV,
  type CpuProfile,
  type FromWorker,
  type MemoryProfile,
  type RelayWorkerConfig,
  type ToWorker,
} from './relay-worker.protocol';

/** A relay reduced to what the worker needs: run one round, say how many events it relayed. */
interface Relay {
  /** `application_name` of its connections, unique to this worker. */
  applicationName: string;
  round(): Promise<number>;
  /** Drains the way a user would, when the relay has its own way (the library's `drain()`). */
  drain?(): Promise<number>;
  close(): Promise<void>;
}

async function openRelay(config: RelayWorkerConfig): Promise<Relay> {
  const applicationName = `bench-relay-worker-${process.pid}`;
  if (config.kind === 'library') {
    const app = await createBenchApp({
      url: config.url,
      consumers: [consumerClass(config.variant)],
      relay: { enabled: false, batchSize: config.batchSize },
      applicationName,
      probe: false,
    });
    return {
      applicationName,
      round: async () => (await app.relay.runOnce()).eventsClaimed,
      drain: async () => (await app.relay.drain()).eventsClaimed,
      close: () => app.close(),
    };
  }
  const session = await RawSession.connect(config.url, applicationName);
  const plan: RawRelayPlan = {
    tenantId: BENCH_TENANT,
    batchSize: config.batchSize,
    consumers: CONSUMER_NAMES[config.variant],
  };
  return {
    applicationName,
    round: () =>
      config.kind === 'raw-batched' ? runBatchedRound(session, plan) : runPerEventRound(session, plan),
    close: () => session.end(),
  };
}

/** Drains round by round, recording RSS at each quarter of the expected events. */
async function drainSampling(
  relay: Relay,
  expected: number,
): Promise<{ events: number; memory: MemoryProfile }> {
  const startRssBytes = process.memoryUsage.rss();
  let peakRssBytes = startRssBytes;
  const sampler = setInterval(() => {
    peakRssBytes = Math.max(peakRssBytes, process.memoryUsage.rss());
  }, 20);
  const atProgress: MemoryProfile['atProgress'] = [];
  const quarters = [0.25, 0.5, 0.75, 1];
  let events = 0;
  try {
    for (;;) {
      const relayed = await relay.round();
      if (relayed === 0) break;
      events += relayed;
      while (quarters.length > 0 && events >= quarters[0]! * expected) {
        peakRssBytes = Math.max(peakRssBytes, process.memoryUsage.rss());
        collectGarbage();
        const { rss, heapUsed } = process.memoryUsage();
        atProgress.push({ progress: quarters.shift()!, rssBytes: rss, heapUsedBytes: heapUsed });
      }
    }
  } finally {
    clearInterval(sampler);
  }
  return { events, memory: { startRssBytes, peakRssBytes, vmHwmBytes: readVmHwm(), atProgress } };
}

/** A full collection, when the process runs with `--expose-gc` (the bench starts sampling workers so). */
function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function drainPlain(relay: Relay): Promise<number> {
  if (relay.drain) return relay.drain();
  let events = 0;
  for (let relayed = await relay.round(); relayed > 0; relayed = await relay.round()) events += relayed;
  return events;
}

function readVmHwm(): number | null {
  try {
    const match = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/**
 * CPU time of the PostgreSQL backends serving this worker (found by `application_name`), read from /proc: only
 * when the server runs on this machine (embedded, or a local DATABASE_URL). Backends opened during the drain
 * count from zero; the pool keeps its connections open until the worker closes.
 */
class BackendCpu {
  private constructor(
    private readonly client: Client | null,
    private readonly applicationName: string,
    private readonly before: Map<number, number>,
  ) {}

  static async open(url: string, applicationName: string): Promise<BackendCpu> {
    const client = new Client({ connectionString: url, application_name: 'bench-cpu-probe' });
    await client.connect();
    const before = await readBackendCpu(client, applicationName);
    if (before !== null) return new BackendCpu(client, applicationName, before);
    await client.end();
    return new BackendCpu(null, applicationName, new Map());
  }

  /** CPU spent since `open`, or null when the backends' processes cannot be read. */
  async spentMs(): Promise<number | null> {
    if (!this.client) return null;
    try {
      const after = await readBackendCpu(this.client, this.applicationName);
      if (after === null) return null;
      let ms = 0;
      for (const [pid, total] of after) ms += total - (this.before.get(pid) ?? 0);
      return ms;
    } finally {
      await this.client.end();
    }
  }
}

/** Milliseconds of CPU per backend pid of `applicationName`, or null when one cannot be read. */
async function readBackendCpu(client: Client, applicationName: string): Promise<Map<number, number> | null> {
  const { rows } = await client.query<{ pid: number }>(
    'select pid from pg_stat_activity where application_name = $1',
    [applicationName],
  );
  const msPerTick = 1000 / 100; // USER_HZ: 100 on Linux
  const totals = new Map<number, number>();
  for (const { pid } of rows) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      return null;
    }
    // `pid (comm) state …`: a process of this machine that is not postgres means the server is elsewhere
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    if (!comm.startsWith('postgres')) return null;
    // after `(comm) `, field 0 is the state (field 3 of the line); utime and stime are fields 14 and 15
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    totals.set(pid, (Number(fields[11]) + Number(fields[12])) * msPerTick);
  }
  return totals;
}

function send(message: FromWorker): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env[WORKER_CONFIG_ENV] ?? 'null') as RelayWorkerConfig | null;
  if (!config || !process.send)
    throw new Error(`relay-worker runs under fork() with ${WORKER_CONFIG_ENV} set`);
  // The bench went away (crash, Ctrl-C): do not linger holding connections.
  process.on('disconnect', () => process.exit(1));
  const relay = await openRelay(config);
  try {
    await new Promise<void>((resolve) => {
      process.on('message', (message: ToWorker) => {
        if (message.type === 'go') resolve();
      });
      send({ type: 'ready' });
    });
    const backends = await BackendCpu.open(config.url, relay.applicationName);
    const cpuBefore = process.cpuUsage();
    const began = performance.now();
    const outcome = config.sampleMemory
      ? await drainSampling(relay, config.expectedEvents)
      : { events: await drainPlain(relay), memory: null };
    const elapsedMs = performance.now() - began;
    const node = process.cpuUsage(cpuBefore);
    const cpu: CpuProfile = {
      nodeMs: (node.user + node.system) / 1000,
      postgresMs: await backends.spentMs(),
    };
    send({ type: 'done', result: { events: outcome.events, elapsedMs, memory: outcome.memory, cpu } });
  } finally {
    await relay.close();
  }
}

main().then(
  () => process.disconnect?.(),
  (error: unknown) => {
    send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exitCode = 1;
    process.disconnect?.();
  },
);
