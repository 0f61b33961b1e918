/**
 * A relay in a process of its own (one Node event loop per relay instance, as in production): boots, says
 * `ready`, drains the backlog on `go`, reports `done` with its count, time and memory, and exits.
 * Started by `harness/relay-workers.ts`; configured by the JSON in `BENCH_RELAY_WORKER`.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { BackendCpu } from '../harness/backend-cpu';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT } from '../harness/bench-database';
import { CONSUMER_NAMES, consumerClass } from '../harness/bench-consumers';
import { runBatchedRound, type RawRelayPlan } from '../raw/batched-relay';
import { runPerEventRound } from '../raw/per-event-relay';
import { RawSession } from '../raw/raw-session';
import { type CpuProfile, type MemoryProfile, type RelayWorkerConfig } from './relay-worker.protocol';
import { readWorkerConfig, readyThenGo, runWorker, sendToBench } from './worker-process';

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

async function main(): Promise<void> {
  const config = readWorkerConfig<RelayWorkerConfig>('relay-worker');
  const relay = await openRelay(config);
  try {
    await readyThenGo();
    const backends = await BackendCpu.open(config.url, [relay.applicationName]);
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
    sendToBench({
      type: 'done',
      result: { events: outcome.events, elapsedMs, memory: outcome.memory, cpu },
    });
  } finally {
    await relay.close();
  }
}

runWorker(main);
