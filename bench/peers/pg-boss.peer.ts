/**
 * pg-boss as a peer: a queue per consumer (`send` to each in the business transaction through its `db`
 * option), LISTEN/NOTIFY on, and workers that take batches; each writing consumer runs `transactional`, so its
 * row commits with the job's completion.
 */
import { randomUUID } from 'node:crypto';
import type { ClientBase } from 'pg';
import { PgBoss, type ConstructorOptions, type Db, type Job } from 'pg-boss';
import { INSERT_EFFECT_SQL, CONSUMER_NAMES, writesEffect } from '../harness/bench-consumers';
import type { BenchDatabase } from '../harness/bench-database';
import {
  LATENCY_CONSUMER,
  type Peer,
  type PeerConsumerOptions,
  type PeerConsumers,
  type PeerEvent,
} from './peer';

const SCHEMA = 'peer_pg_boss';

/** Every queue the bench's consumers use (both variants). */
const QUEUES = [...new Set([...Object.values(CONSUMER_NAMES).flat(), LATENCY_CONSUMER])];

/**
 * Its API docs' throughput and latency knobs: batches (`batchSize`), fetching again at once while batches come
 * back full (`burstWhenBatchFull`), and LISTEN/NOTIFY (`useListenNotify` plus the queue's `notify`).
 */
const BATCH_SIZE = 100;
const LOCAL_CONCURRENCY = 1;
const POOL_MAX = 10;

/** The keyed enqueue line's window, as the library's default `dedupe.windowMs`. */
const DEDUPE_SECONDS = 86_400;

const WORK_OPTIONS = { batchSize: BATCH_SIZE, burstWhenBatchFull: true, localConcurrency: LOCAL_CONCURRENCY };

function options(url: string, applicationName: string, extra: ConstructorOptions = {}): ConstructorOptions {
  return {
    connectionString: url,
    schema: SCHEMA,
    application_name: applicationName,
    max: POOL_MAX,
    ...extra,
  };
}

/** Starts an instance; its `error` events fail the run instead of passing unseen. */
async function startBoss(
  config: ConstructorOptions,
): Promise<{ boss: PgBoss; failure: (this: void) => unknown }> {
  const boss = new PgBoss(config);
  let failure: unknown = null;
  boss.on('error', (error) => (failure ??= error));
  await boss.start();
  return { boss, failure: () => failure };
}

/** A producer or loader instance: no maintenance, no cron, no migration check beyond the first. */
const CLIENT_ONLY: ConstructorOptions = { supervise: false, schedule: false, migrate: false };

function transactionDb(client: ClientBase): Db {
  return { executeSql: (text: string, values?: unknown[]) => client.query(text, values) };
}

export const pgBossPeer: Peer = {
  name: 'pg-boss',
  version: '12.38.0',
  settings:
    `work() with batchSize ${BATCH_SIZE}, burstWhenBatchFull, localConcurrency ${LOCAL_CONCURRENCY}; ` +
    `useListenNotify and queue notify on; pool max ${POOL_MAX}; the writing consumers transactional ` +
    '(its API docs; no tuning guide found), everything else default',
  fanOut: 'one queue per consumer, a send() to each in the transaction',
  dedupe:
    'send() with singletonKey and singletonSeconds 86400 (a key once per day-long slot, on any queue policy: ' +
    'its unique index job_i4)',
  delay:
    'send() with startAfter (a Date); a job that becomes due is found by the worker’s poll: on a notify queue ' +
    'notifyPollingIntervalSeconds, 30 by default (pollingIntervalSeconds, 2 by default, without notify)',
  writesAtomically: true,

  async install(db) {
    const { boss } = await startBoss(options(db.url, 'bench-admin', { supervise: false, schedule: false }));
    try {
      for (const queue of QUEUES) await boss.createQueue(queue, { notify: true });
    } finally {
      await boss.stop();
    }
  },

  async reset(db) {
    await db.sql(`truncate ${SCHEMA}.job`);
  },

  async uninstall(db) {
    await db.sql(`drop schema if exists ${SCHEMA} cascade`);
  },

  async openProducer(url, applicationName) {
    const { boss } = await startBoss(options(url, applicationName, CLIENT_ONLY));
    return {
      enqueue: async (client: ClientBase, event: PeerEvent, consumers, dedupeKey, runAt) => {
        const db = transactionDb(client);
        const keyed =
          dedupeKey === undefined ? {} : { singletonKey: dedupeKey, singletonSeconds: DEDUPE_SECONDS };
        const delayed = runAt === undefined ? {} : { startAfter: runAt };
        for (const queue of consumers) await boss.send(queue, event, { db, ...keyed, ...delayed });
      },
      close: () => boss.stop(),
    };
  },

  async loadBacklog(db: BenchDatabase, count, consumers) {
    const { boss } = await startBoss(options(db.url, 'bench-admin', CLIENT_ONLY));
    try {
      for (let done = 0; done < count; done += LOAD_CHUNK) {
        const events = Array.from({ length: Math.min(LOAD_CHUNK, count - done) }, (_, i) =>
          backlogEvent(done + i),
        );
        for (const queue of consumers)
          await boss.insert(
            queue,
            events.map((data) => ({ data })),
          );
      }
    } finally {
      await boss.stop();
    }
  },

  async unsettled(query) {
    const [row] = await query(`select count(*)::int as n from ${SCHEMA}.job where state <> 'completed'`);
    return row!.n;
  },

  async startConsumers(consumerOptions: PeerConsumerOptions): Promise<PeerConsumers> {
    const { url, applicationName, consumers, onHandled, pollIntervalMs } = consumerOptions;
    const { boss, failure } = await startBoss(options(url, applicationName, { useListenNotify: true }));
    // its defaults unless lowered: a key present, even undefined, replaces the default
    const polling =
      pollIntervalMs === undefined
        ? {}
        : {
            pollingIntervalSeconds: pollIntervalMs / 1000,
            notifyPollingIntervalSeconds: pollIntervalMs / 1000,
          };
    const workOptions = { ...WORK_OPTIONS, ...polling };
    for (const queue of consumers) {
      if (writesEffect(queue)) {
        const transactional = { ...workOptions, transactional: true } as const;
        await boss.work<PeerEvent, unknown, typeof transactional>(queue, transactional, async (jobs, tx) => {
          for (const job of jobs) {
            onHandled(job.data.eventId, queue);
            await tx.executeSql(INSERT_EFFECT_SQL, [job.data.eventId, queue]);
          }
        });
      } else {
        await boss.work<PeerEvent>(queue, workOptions, async (jobs: Job<PeerEvent>[]) => {
          for (const job of jobs) onHandled(job.data.eventId, queue);
        });
      }
    }
    return {
      stop: async () => {
        await boss.stop({ graceful: true });
        const error = failure();
        if (error) throw error instanceof Error ? error : new Error('pg-boss failed', { cause: error });
      },
    };
  },
};

/** Events per `insert()` call while loading. */
const LOAD_CHUNK = 5_000;

function backlogEvent(i: number): PeerEvent {
  return {
    eventId: randomUUID(),
    contactId: randomUUID(),
    name: `Contact ${i}`,
    email: `contact${i}@example.com`,
  };
}
