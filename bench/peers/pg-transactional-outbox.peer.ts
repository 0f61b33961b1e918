/**
 * pg-transactional-outbox as a peer: one outbox message per event, stored in the business transaction with
 * its message storage on the caller's client; its polling listener hands each message to one handler (one per
 * message type), which runs both bench consumers on the client whose transaction marks the message processed.
 */
import type { ClientBase } from 'pg';
import {
  DatabaseSetup,
  getDisabledLogger,
  initializeMessageStorage,
  initializePollingMessageListener,
  type PollingListenerConfig,
  type TransactionalMessage,
} from 'pg-transactional-outbox';
import { BENCH_EVENT } from '../harness/bench-database';
import { INSERT_EFFECT_SQL, writesEffect } from '../harness/bench-consumers';
import type { Peer, PeerConsumerOptions, PeerConsumers, PeerEvent } from './peer';

const SCHEMA = 'peer_pg_transactional_outbox';
const TABLE = 'outbox';
const NEXT_MESSAGES_FUNCTION = 'next_outbox_messages';
const AGGREGATE_TYPE = 'contact';

/**
 * Its README's knobs: the polling listener (logical replication would need `wal_level = logical` on the
 * server, which changes every other system's WAL too), a short polling interval, a batch as large as the
 * handler pool, messages marked `parallel` (the default, `sequential`, processes one message at a time), and
 * the outbox example's protections off.
 */
const BATCH_SIZE = 10;
const POLLING_INTERVAL_MS = 50;
const HANDLER_POOL_MAX = 10;

const logger = getDisabledLogger();

function listenerConfig(url: string, applicationName: string): PollingListenerConfig {
  const connection = { connectionString: url, application_name: applicationName };
  return {
    outboxOrInbox: 'outbox',
    dbListenerConfig: connection,
    dbHandlerConfig: { ...connection, max: HANDLER_POOL_MAX } as PollingListenerConfig['dbHandlerConfig'],
    settings: {
      dbSchema: SCHEMA,
      dbTable: TABLE,
      enableMaxAttemptsProtection: false,
      enablePoisonousMessageProtection: false,
      nextMessagesFunctionSchema: SCHEMA,
      nextMessagesFunctionName: NEXT_MESSAGES_FUNCTION,
      nextMessagesBatchSize: BATCH_SIZE,
      nextMessagesPollingIntervalInMs: POLLING_INTERVAL_MS,
    },
  };
}

export const pgTransactionalOutboxPeer: Peer = {
  name: 'pg-transactional-outbox',
  version: '0.5.7',
  settings:
    `polling listener every ${POLLING_INTERVAL_MS} ms, nextMessagesBatchSize ${BATCH_SIZE}, handler pool ` +
    `max ${HANDLER_POOL_MAX}, messages concurrency 'parallel', max-attempts and poisonous-message protection ` +
    "off (its README's outbox example)",
  fanOut: 'one message per event; its single handler per message type runs both consumers',
  writesAtomically: true,
  // About 100–400 events/s here: 20,000 events took over 5 minutes per drain with a writing consumer. A drain
  // mostly has one message retried after a lock conflict, 5 s later (see drainNote), which bounds its rate on a
  // small backlog: 2,000 events drained at 340–390/s, 1,000 at 180–200/s (2026-12-05), so 2,000 it is.
  maxDrainBacklog: 2_000,

  async install(db) {
    const setup = {
      outboxOrInbox: 'outbox' as const,
      database: db.name,
      schema: SCHEMA,
      table: TABLE,
      listenerRole: 'unused',
      nextMessagesName: NEXT_MESSAGES_FUNCTION,
    };
    await db.sql(DatabaseSetup.dropAndCreateTable(setup));
    await db.sql(DatabaseSetup.createPollingFunction(setup));
    await db.sql(DatabaseSetup.setupPollingIndexes(setup));
  },

  async reset(db) {
    await db.sql(`truncate ${SCHEMA}.${TABLE}`);
  },

  async uninstall(db) {
    await db.sql(`drop schema if exists ${SCHEMA} cascade`);
  },

  async openProducer(url, applicationName) {
    const store = initializeMessageStorage(listenerConfig(url, applicationName), logger);
    return {
      enqueue: async (client: ClientBase, event: PeerEvent) => {
        const message: TransactionalMessage = {
          id: event.eventId,
          aggregateType: AGGREGATE_TYPE,
          aggregateId: event.contactId,
          messageType: BENCH_EVENT,
          concurrency: 'parallel',
          payload: event,
        };
        await store(message, client);
      },
      close: () => Promise.resolve(),
    };
  },

  async loadBacklog(db, count) {
    await db.sql(
      `insert into ${SCHEMA}.${TABLE} (id, aggregate_type, aggregate_id, message_type, concurrency, payload)
       select e.id, $3, e.contact_id::text, $4, 'parallel',
              jsonb_build_object('eventId', e.id, 'contactId', e.contact_id, 'name', 'Contact ' || e.g,
                                 'email', 'contact' || e.g || '@example.com')
         from (select g, gen_random_uuid() as id, gen_random_uuid() as contact_id
                 from generate_series($1::int, $2::int) g) e
        order by e.g`,
      [1, count, AGGREGATE_TYPE, BENCH_EVENT],
    );
  },

  async unsettled(query) {
    const [row] = await query(`select count(*)::int as n from ${SCHEMA}.${TABLE} where processed_at is null`);
    return row!.n;
  },

  async drainNote(query) {
    const [row] = await query(`select count(*)::int as n from ${SCHEMA}.${TABLE} where started_attempts > 1`);
    // A message whose row its next poll still held locked fails its attempt ("could not obtain lock") and
    // waits out nextMessagesLockInMs (5 s by default) before it is tried again.
    return row!.n > 0 ? `${row!.n} message(s) needed a second attempt after a lock conflict` : null;
  },

  async startConsumers(options: PeerConsumerOptions): Promise<PeerConsumers> {
    const { consumers } = options;
    const [shutdown] = initializePollingMessageListener(
      listenerConfig(options.url, options.applicationName),
      [
        {
          aggregateType: AGGREGATE_TYPE,
          messageType: BENCH_EVENT,
          handle: async (message, client) => {
            const { eventId } = message.payload as PeerEvent;
            for (const consumer of consumers) {
              options.onHandled(eventId, consumer);
              if (writesEffect(consumer)) await client.query(INSERT_EFFECT_SQL, [eventId, consumer]);
            }
          },
        },
      ],
      logger,
    );
    return { stop: () => shutdown() };
  },
};
