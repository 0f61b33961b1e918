/**
 * graphile-worker as a peer: a job per consumer (its way to fan out), added in the business transaction with
 * its `add_jobs` SQL function on the caller's connection; consumers are tasks of one runner per process.
 */
import { Pool, type ClientBase } from 'pg';
import { Logger, run, runMigrations, type Task } from 'graphile-worker';
import { INSERT_EFFECT_SQL, writesEffect } from '../harness/bench-consumers';
import type { BenchDatabase } from '../harness/bench-database';
import type { Peer, PeerConsumerOptions, PeerConsumers, PeerEvent } from './peer';

const SCHEMA = 'peer_graphile_worker';

/** The docs' performance page configuration ("Quick stats … achieved with this configuration"). */
const CONCURRENT_JOBS = 24;
const MAX_POOL_SIZE = 25;
const LOCAL_QUEUE_SIZE = 500;
const COMPLETE_JOB_BATCH_DELAY_MS = 0;

/** Its logs go nowhere: the bench prints only figures. */
const silent = new Logger(() => () => undefined);

/** `add_jobs` with one job spec per consumer; the payload carries the event. */
const ADD_JOBS_SQL = `select 1 from ${SCHEMA}.add_jobs(
    array(select (k.name, $1::json, null, null, null, null, null, null)::${SCHEMA}.job_spec
            from unnest($2::text[]) as k(name)))`;

/** The same with a `job_key` per job (the key and the task: a job key is unique across tasks). */
const ADD_KEYED_JOBS_SQL = `select 1 from ${SCHEMA}.add_jobs(
    array(select (k.name, $1::json, null, null, null, $3 || ':' || k.name, null, null)::${SCHEMA}.job_spec
            from unnest($2::text[]) as k(name)))`;

/** The same with a `run_at` per job. */
const ADD_DELAYED_JOBS_SQL = `select 1 from ${SCHEMA}.add_jobs(
    array(select (k.name, $1::json, null, $3::timestamptz, null, null, null, null)::${SCHEMA}.job_spec
            from unnest($2::text[]) as k(name)))`;

/** Its default `pollInterval` (ms), for jobs that become due while no NOTIFY comes. */
const DEFAULT_POLL_INTERVAL_MS = 2000;

export const graphileWorkerPeer: Peer = {
  name: 'graphile-worker',
  version: '0.18.0',
  settings:
    `concurrentJobs ${CONCURRENT_JOBS}, maxPoolSize ${MAX_POOL_SIZE}, localQueue.size ${LOCAL_QUEUE_SIZE}, ` +
    `completeJobBatchDelay ${COMPLETE_JOB_BATCH_DELAY_MS}, failJobBatchDelay 0 (its docs' Performance page), ` +
    'prepared statements on (default), woken by its LISTEN/NOTIFY',
  fanOut: 'one job per consumer, added by add_jobs in one statement',
  dedupe: 'job_key per job (add_jobs, its default mode: a second add replaces a job not yet locked)',
  delay:
    `run_at per job (add_jobs); a job that becomes due is found by its poll, pollInterval ` +
    `${DEFAULT_POLL_INTERVAL_MS} ms by default`,
  writesAtomically: false,

  async install(db) {
    await runMigrations({ connectionString: db.url, schema: SCHEMA, logger: silent });
  },

  async reset(db) {
    await db.sql(`truncate ${SCHEMA}._private_jobs`);
  },

  async uninstall(db) {
    await db.sql(`drop schema if exists ${SCHEMA} cascade`);
  },

  async openProducer() {
    return {
      enqueue: async (client: ClientBase, event: PeerEvent, consumers, dedupeKey, runAt) => {
        if (runAt !== undefined)
          await client.query(ADD_DELAYED_JOBS_SQL, [JSON.stringify(event), consumers, runAt.toISOString()]);
        else if (dedupeKey === undefined)
          await client.query(ADD_JOBS_SQL, [JSON.stringify(event), consumers]);
        else await client.query(ADD_KEYED_JOBS_SQL, [JSON.stringify(event), consumers, dedupeKey]);
      },
      close: () => Promise.resolve(),
    };
  },

  async loadBacklog(db: BenchDatabase, count, consumers) {
    for (let done = 0; done < count; done += LOAD_CHUNK) {
      await db.sql(
        `select count(*) from ${SCHEMA}.add_jobs(array(
           select (k.name, json_build_object('eventId', e.id, 'contactId', e.contact_id, 'name', 'Contact ' || e.g,
                                             'email', 'contact' || e.g || '@example.com'),
                   null, null, null, null, null, null)::${SCHEMA}.job_spec
             from (select g, gen_random_uuid() as id, gen_random_uuid() as contact_id
                     from generate_series($1::int, $2::int) g) e
            cross join unnest($3::text[]) as k(name)
            order by e.g))`,
        [done + 1, Math.min(count, done + LOAD_CHUNK), consumers],
      );
    }
  },

  async unsettled(query) {
    const [row] = await query(`select count(*)::int as n from ${SCHEMA}._private_jobs`);
    return row!.n;
  },

  async startConsumers(options: PeerConsumerOptions): Promise<PeerConsumers> {
    const pool = new Pool({
      connectionString: options.url,
      max: MAX_POOL_SIZE,
      application_name: options.applicationName,
    });
    let failure: unknown = null;
    const fail = (error: Error): void => void (failure ??= error);
    pool.on('error', fail);
    pool.on('connect', (client) => client.on('error', fail));
    const task =
      (consumer: string): Task =>
      async (payload, helpers) => {
        const { eventId } = payload as PeerEvent;
        options.onHandled(eventId, consumer);
        // withPgClient opens no transaction: the row commits before, and apart from, the job's completion.
        if (writesEffect(consumer))
          await helpers.withPgClient((client) => client.query(INSERT_EFFECT_SQL, [eventId, consumer]));
      };
    const runner = await run({
      pgPool: pool,
      schema: SCHEMA,
      concurrency: CONCURRENT_JOBS,
      pollInterval: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      noHandleSignals: true,
      logger: silent,
      taskList: Object.fromEntries(options.consumers.map((name) => [name, task(name)])),
      preset: {
        worker: {
          localQueue: { size: LOCAL_QUEUE_SIZE },
          completeJobBatchDelay: COMPLETE_JOB_BATCH_DELAY_MS,
          failJobBatchDelay: 0,
        },
      },
    });
    return {
      stop: async () => {
        await runner.stop();
        await pool.end();
        if (failure)
          throw failure instanceof Error ? failure : new Error('graphile-worker failed', { cause: failure });
      },
    };
  },
};

/** Events per loading statement (two jobs each). */
const LOAD_CHUNK = 10_000;
