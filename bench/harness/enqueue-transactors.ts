/**
 * Business transactions for the enqueue measurements: a contact row and an outbox event, through the Nest app
 * (TypeORM + `OutboxService.enqueue`) or by hand on `pg` connections, and the loop that drives them back to back.
 * Used by the enqueue scenario and by the peers scenario.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { OutboxEventInput, OutboxRelayOptions } from 'nestjs-pg-outbox';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { createBenchApp } from './bench-app';
import { BENCH_EVENT, BENCH_TENANT } from './bench-database';
import { now } from './stats';
import type { PoolClient } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { insertContact, insertEvent, type SqlStatement } from '../raw/raw.queries';
import { RawSession } from '../raw/raw-session';
import { CONSUMER_NAMES } from './bench-consumers';
import type { Peer, PeerEvent } from '../peers/peer';

/** `application_name` of the enqueue connections unless a caller names its own. */
export const ENQUEUE_APPLICATION_NAME = 'bench-enqueue';

export type Side = 'library' | 'raw';

/** What each transaction does, and through what. */
export interface Workload {
  side: Side;
  /** Insert a contact (the business write). */
  business: boolean;
  /** Add an outbox event. */
  withEvent: boolean;
  /** Library only: relay options of the app (a diagnostic variant turns the wake-up NOTIFY off). */
  relay?: OutboxRelayOptions;
  /** Library only: `preparedStatements` of the app (a diagnostic variant turns the named insert off). */
  preparedStatements?: boolean;
  /** Library only: switches over the relay's policy (a decision script sets the wake-up pacer's gap). */
  policy?: Partial<RelayPolicy>;
  /** Library only: each event with an idempotency key of its own (`dedupe: { key }`, a fresh UUID). */
  keyed?: boolean;
  /** Library only: the event as the raw line's hand-written insert through the manager, not `enqueue` (the app's DataSource against a plain one). */
  handWritten?: boolean;
}

/** Runs one business transaction on connection `worker`. */
export interface Transactor {
  run(worker: number): Promise<void>;
  /** Statements sent so far, wake-up NOTIFYs and other statements outside the transactions included. */
  statements(): number;
  close(): Promise<void>;
}

export function contactEvent(): {
  contact: { id: string; name: string; email: string };
  event: OutboxEventInput<Record<string, string>>;
} {
  const id = randomUUID();
  const contact = { id, name: `Contact ${id.slice(0, 8)}`, email: `${id.slice(0, 8)}@example.com` };
  return {
    contact,
    event: {
      tenantId: BENCH_TENANT,
      eventName: BENCH_EVENT,
      payload: { contactId: id, name: contact.name, email: contact.email },
      aggregateType: 'contact',
      aggregateId: id,
    },
  };
}

/** Business transactions through the Nest app: TypeORM's `transaction`, and `enqueue` when `withEvent`. */
export async function libraryTransactor(
  url: string,
  connections: number,
  { business, withEvent, relay, preparedStatements, policy, keyed, handWritten }: Workload,
  applicationName = ENQUEUE_APPLICATION_NAME,
  probe = true,
): Promise<Transactor> {
  // The pool an app would have (pg's default of 10), not one sized to the load: the library may use a
  // connection of its own beside the business transactions (its wake-up NOTIFY), as it would in an app.
  const poolSize = Math.max(10, connections);
  const app = await createBenchApp({
    url,
    consumers: [],
    relay,
    preparedStatements,
    policy,
    poolSize,
    applicationName,
    probe,
  });
  let statements = 0;
  return {
    statements: () => (statements += app.probe.take().total),
    run: () =>
      app.dataSource.transaction(async (manager) => {
        const { contact, event } = contactEvent();
        if (business) {
          const insert = insertContact(contact.id, BENCH_TENANT, contact.name, contact.email);
          await manager.query(insert.text, insert.values);
        }
        if (withEvent && handWritten) {
          const insert = rawEventInsert(event);
          await manager.query(insert.text, insert.values);
        } else if (withEvent && keyed)
          await app.outbox.enqueue(manager, { ...event, dedupe: { key: randomUUID() } });
        else if (withEvent) await app.outbox.enqueue(manager, event);
      }),
    close: () => app.close(),
  };
}

/** The same transactions by hand on `pg` connections, the event as a plain INSERT of the same row. */
export async function rawTransactor(
  url: string,
  connections: number,
  { business, withEvent }: Workload,
  applicationName = ENQUEUE_APPLICATION_NAME,
): Promise<Transactor> {
  const sessions = await Promise.all(
    Array.from({ length: connections }, () => RawSession.connect(url, applicationName)),
  );
  return {
    statements: () => sessions.reduce((sum, s) => sum + s.queries, 0),
    run: (worker) => {
      const session = sessions[worker]!;
      return session.transaction(async () => {
        const { contact, event } = contactEvent();
        if (business)
          await session.rows(insertContact(contact.id, BENCH_TENANT, contact.name, contact.email));
        if (withEvent) await session.rows(rawEventInsert(event));
      });
    },
    close: async () => {
      await Promise.all(sessions.map((s) => s.end()));
    },
  };
}

/**
 * The same business transaction on a plain TypeORM DataSource of the same pool size as the bench app's (what
 * a NestJS team on TypeORM has, with or without this library), the event added by `addEvent` inside it: a
 * hand-written INSERT through the manager, or a peer's own call on the transaction's `pg` client (TypeORM's
 * `QueryRunner.connect()` returns it).
 */
export async function typeormTransactor(
  url: string,
  connections: number,
  applicationName: string,
  addEvent: (manager: EntityManager, client: PoolClient) => Promise<void>,
): Promise<Transactor> {
  const dataSource = await new DataSource({
    type: 'postgres',
    url,
    logging: false,
    extra: { max: Math.max(10, connections), application_name: applicationName },
  }).initialize();
  return {
    statements: () => Number.NaN,
    run: () =>
      dataSource.transaction(async (manager) => {
        const { contact } = contactEvent();
        const insert = insertContact(contact.id, BENCH_TENANT, contact.name, contact.email);
        await manager.query(insert.text, insert.values);
        await addEvent(manager, (await manager.queryRunner!.connect()) as PoolClient);
      }),
    close: () => dataSource.destroy(),
  };
}

/**
 * The hand-written insert of the event in the same transaction: through the manager (TypeORM's `query()`,
 * unnamed, the peers scenario's raw line), or with `named`, as a named statement on the transaction's `pg` client.
 */
export function rawInsertTransactor(
  url: string,
  connections: number,
  applicationName: string,
  named = false,
): Promise<Transactor> {
  return typeormTransactor(url, connections, applicationName, async (manager, client) => {
    const insert = rawEventInsert();
    if (named) await client.query({ name: 'bench_raw_event', text: insert.text, values: insert.values });
    else await manager.query(insert.text, insert.values);
  });
}

/** A contact's event as the peers take it. */
export function peerEvent(): PeerEvent {
  const { contact } = contactEvent();
  return { eventId: randomUUID(), contactId: contact.id, name: contact.name, email: contact.email };
}

/**
 * The same business transaction with the event added by a peer's own call on the transaction's `pg` client,
 * for the no-op consumers; with `keyed`, under a fresh deduplication key each.
 */
export async function peerTransactor(
  url: string,
  connections: number,
  peer: Peer,
  applicationName: string,
  keyed = false,
): Promise<Transactor> {
  const producer = await peer.openProducer(url, applicationName);
  const transactor = await typeormTransactor(url, connections, applicationName, (_manager, client) =>
    producer.enqueue(client, peerEvent(), CONSUMER_NAMES['no-db'], keyed ? randomUUID() : undefined),
  );
  return {
    ...transactor,
    close: async () => {
      await transactor.close();
      await producer.close();
    },
  };
}

/** The event row `enqueue` would insert, as a hand-written INSERT of the same columns. */
export function rawEventInsert(event = contactEvent().event): SqlStatement {
  return insertEvent({
    id: randomUUID(),
    tenantId: event.tenantId,
    eventName: event.eventName,
    payloadJson: JSON.stringify(event.payload),
    aggregateType: event.aggregateType!,
    aggregateId: event.aggregateId!,
  });
}

/** The peers scenario's library workload: a contact through the manager, then its event. */
const ENQUEUE_LIBRARY = { side: 'library', business: true, withEvent: true } as const;

/**
 * The one-connection enqueue variants the decision scripts compare, in their default order: `raw` (the hand-written
 * insert through the same manager, the peers scenario's raw line), `library, wakeUps off` (no NOTIFY), `library`
 * (as shipped). Each opens on `url` with the connections' `application_name` `name`.
 */
export const ONE_CONNECTION_ENQUEUES: Record<string, (url: string, name: string) => Promise<Transactor>> = {
  raw: (url, name) =>
    typeormTransactor(url, 1, name, async (manager) => {
      const insert = rawEventInsert();
      await manager.query(insert.text, insert.values);
    }),
  'library, wakeUps off': (url, name) =>
    libraryTransactor(url, 1, { ...ENQUEUE_LIBRARY, relay: { wakeUps: 'off' } }, name, false),
  library: (url, name) => libraryTransactor(url, 1, ENQUEUE_LIBRARY, name, false),
};

export function openTransactor(url: string, connections: number, workload: Workload): Promise<Transactor> {
  return workload.side === 'library'
    ? libraryTransactor(url, connections, workload)
    : rawTransactor(url, connections, workload);
}

/** What `connections` loops of transactions did in a while. */
export interface Driven {
  commits: number;
  ms: number;
  /** CPU of this process meanwhile, in µs. */
  cpuUs: number;
  /** Turns of the event loop meanwhile, and the events its poll delivered (libuv's own counts). */
  loopTurns: number;
  loopEvents: number;
}

/** Runs `connections` loops of transactions back to back for `ms`. */
export async function drive(transactor: Transactor, connections: number, ms: number): Promise<Driven> {
  let commits = 0;
  const loopBefore = performance.nodeTiming.uvMetricsInfo;
  const cpuBefore = process.cpuUsage();
  const began = now();
  const until = began + ms;
  const loop = async (worker: number): Promise<void> => {
    while (now() < until) {
      await transactor.run(worker);
      commits++;
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, worker) => loop(worker)));
  const cpu = process.cpuUsage(cpuBefore);
  const loopAfter = performance.nodeTiming.uvMetricsInfo;
  return {
    commits,
    ms: now() - began,
    cpuUs: cpu.user + cpu.system,
    loopTurns: loopAfter.loopCount - loopBefore.loopCount,
    loopEvents: loopAfter.events - loopBefore.events,
  };
}

/**
 * A runner of an open transaction whose `pg` client answers every statement at once, for `enqueue`'s own work with
 * its I/O stubbed (checks, id, statement, the insert's path, the wake-up's bookkeeping). Pass it `as never`.
 */
export function stubbedRunner(dataSource: DataSource): { isTransactionActive: boolean } {
  const answered = Promise.resolve({ rows: [], rowCount: 1 });
  const client = { query: () => answered, pipeline: false };
  return {
    isTransactionActive: true,
    isReleased: false,
    startTransaction: () => undefined,
    connection: dataSource,
    databaseConnection: client,
    connect: () => Promise.resolve(client),
    query: () => Promise.resolve([]),
  } as { isTransactionActive: boolean };
}

/**
 * `enqueue` with its I/O stubbed (see `stubbedRunner`) in an app of its own with `relay.wakeUps: 'off'` (no
 * NOTIFY sent): `enqueue(i)` adds the i-th of 1,000 contact events, `commit(i)` also tells the DataSource's
 * subscribers of the commit, as TypeORM does.
 */
export async function stubbedEnqueue(
  url: string,
  applicationName: string,
): Promise<{
  enqueue: (i: number) => Promise<unknown>;
  commit: (i: number) => Promise<void>;
  close: () => Promise<void>;
}> {
  const app = await createBenchApp({
    url,
    consumers: [],
    probe: false,
    relay: { wakeUps: 'off' },
    applicationName,
  });
  const runner = stubbedRunner(app.dataSource);
  const events = Array.from({ length: 1000 }, () => contactEvent().event);
  const subscribers = app.dataSource.subscribers;
  const enqueue = (i: number): Promise<unknown> => {
    runner.isTransactionActive = true;
    return app.outbox.enqueue(runner as never, events[i % 1000]!);
  };
  return {
    enqueue,
    commit: async (i) => {
      await enqueue(i);
      runner.isTransactionActive = false;
      for (const subscriber of subscribers)
        void subscriber.afterTransactionCommit?.({ queryRunner: runner } as never);
    },
    close: () => app.close(),
  };
}
