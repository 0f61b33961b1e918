/**
 * A peer's consumers in a process of their own, as `workers/relay-worker.ts` runs the library's relay: says
 * `ready`, starts the consumers on `go`, and reports `done` once every event was handled by both consumers and
 * marked done in the peer's tables. Started by `harness/relay-workers.ts` with this file; configured by the
 * JSON in `BENCH_RELAY_WORKER` (a {@link PeerWorkerConfig}).
 *
 * The clock starts at the first handler call, not at `go`: starting a peer's consumers (its migration check,
 * its pools) is then not counted against it, which is the conservative side for the library.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { BackendCpu } from '../harness/backend-cpu';
import { untrackSession } from '../harness/statement-stats';
import { CONSUMER_NAMES, type ConsumerVariant } from '../harness/bench-consumers';
import { sleep } from '../harness/stats';
import { type CpuProfile } from '../workers/relay-worker.protocol';
import { readWorkerConfig, readyThenGo, runWorker, sendToBench } from '../workers/worker-process';
import type { PeerName } from './peer';
import { peerNamed } from './peers';

/** What the bench gives a peer worker. */
export interface PeerWorkerConfig {
  url: string;
  kind: PeerName;
  variant: ConsumerVariant;
  /** Events in the backlog; each must reach both consumers. */
  expectedEvents: number;
  sampleMemory: false;
}

/** How often the worker asks whether every done mark is in, once every handler ran. */
const SETTLED_POLL_MS = 5;

async function main(): Promise<void> {
  const config = readWorkerConfig<PeerWorkerConfig>('peer-worker');
  const peer = peerNamed(config.kind);
  const applicationName = `bench-peer-worker-${process.pid}`;
  const probe = new Client({ connectionString: config.url, application_name: 'bench-peer-probe' });
  await probe.connect();
  await untrackSession((text) => probe.query(text));
  const probeRows = async (text: string): Promise<{ n: number }[]> =>
    (await probe.query<{ n: number }>(text)).rows;
  try {
    await readyThenGo();
    const backends = await BackendCpu.open(config.url, [applicationName]);
    const cpuBefore = process.cpuUsage();
    const consumerNames = CONSUMER_NAMES[config.variant];
    const expectedHandled = consumerNames.length * config.expectedEvents;
    let handled = 0;
    let firstHandledAt: number | null = null;
    let allHandled: () => void = () => undefined;
    const everyHandlerRan = new Promise<void>((resolve) => (allHandled = resolve));
    const consumers = await peer.startConsumers({
      url: config.url,
      consumers: consumerNames,
      applicationName,
      onHandled: () => {
        firstHandledAt ??= performance.now();
        if (++handled === expectedHandled) allHandled();
      },
    });
    let settledAt: number;
    let cpu: CpuProfile;
    try {
      await everyHandlerRan;
      while ((await peer.unsettled(probeRows)) > 0) await sleep(SETTLED_POLL_MS);
      settledAt = performance.now();
      const node = process.cpuUsage(cpuBefore);
      cpu = { nodeMs: (node.user + node.system) / 1000, postgresMs: await backends.spentMs() };
    } finally {
      await consumers.stop();
    }
    sendToBench({
      type: 'done',
      result: { events: config.expectedEvents, elapsedMs: settledAt - firstHandledAt!, memory: null, cpu },
    });
  } finally {
    await probe.end();
  }
}

runWorker(main);
