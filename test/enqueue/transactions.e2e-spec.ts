import { Injectable, Logger, Module, type DynamicModule, type Type } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import {
  ClsPluginTransactional,
  InjectTransactionHost,
  Transactional,
  TransactionHost,
} from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import type { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxError,
  OutboxModule,
  OutboxRelay,
  OutboxService,
  type OutboxEvent,
  type OutboxModuleOptions,
} from 'nestjs-pg-outbox';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

const APP_TABLES = [
  'create table contacts (name text primary key)',
  'create table timeline (event_id uuid not null, attempt int not null)',
];
const quiet = {
  log: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
  verbose: () => undefined,
};

type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;

/** An app's service written the @nestjs-cls/transactional way: no manager passed anywhere. */
@Injectable()
class ContactsService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: OutboxService,
  ) {}

  @Transactional()
  async create(name: string, fail = false): Promise<string> {
    await this.txHost.tx.query('insert into contacts (name) values ($1)', [name]);
    const id = await this.outbox.enqueue({
      tenantId: TENANT,
      eventName: 'test.contact.created.v1',
      payload: { name },
    });
    if (fail) throw new Error('rolled back on purpose');
    return id;
  }

  createWithHost(name: string, fail = false): Promise<string> {
    return this.txHost.withTransaction(async () => {
      await this.txHost.tx.query('insert into contacts (name) values ($1)', [name]);
      const [id] = await this.outbox.enqueueMany([
        { tenantId: TENANT, eventName: 'test.contact.created.v1', payload: { name } },
      ]);
      if (fail) throw new Error('rolled back on purpose');
      return id!;
    });
  }

  outside(name: string): Promise<string> {
    return this.outbox.enqueue({ tenantId: TENANT, eventName: 'test.contact.created.v1', payload: { name } });
  }
}

/** A repository service that knows nothing of the outbox: it writes through the TransactionHost. */
@Injectable()
class TimelineRepository {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  async add(eventId: string, attempt: number): Promise<void> {
    await this.txHost.tx.query('insert into timeline (event_id, attempt) values ($1, $2)', [
      eventId,
      attempt,
    ]);
  }
}

/** Its first attempt writes through the repository, enqueues a follow-up, then fails: all of it must roll back. */
@Injectable()
class TimelineConsumer {
  failures = 1;
  readonly followUps: string[] = [];

  constructor(
    private readonly timeline: TimelineRepository,
    private readonly outbox: OutboxService,
  ) {}

  @OnOutboxEvent('test.contact.created.v1', { consumer: 'timeline' })
  async record(event: OutboxEvent, context: { attempt: number }): Promise<void> {
    await this.timeline.add(event.eventId, context.attempt);
    await this.outbox.enqueue({
      tenantId: TENANT,
      eventName: 'test.timeline.added.v1',
      payload: { of: event.eventId },
    });
    if (this.failures-- > 0) throw new Error('fails after its writes');
  }

  @OnOutboxEvent('test.timeline.added.v1', { consumer: 'follow-up' })
  followUp(event: OutboxEvent<{ of: string }>): void {
    this.followUps.push(event.data.of);
  }
}

interface ClsApp {
  app: TestingModule;
  outbox: OutboxService;
  relay: OutboxRelay;
  close(): Promise<void>;
}

/** The app as a user wires it: TypeORM, nestjs-cls with the transactional plugin, the outbox joining its host. */
async function buildClsApp(options: {
  url: string;
  otherUrl?: string;
  named?: string;
  outbox?: OutboxModuleOptions;
  cls?: boolean;
  /** Register the plugin for the default DataSource even when the outbox uses the named one (a wiring mistake). */
  hostOnDefault?: boolean;
  providers?: Type[];
}): Promise<ClsApp> {
  const { named } = options;
  const imports: DynamicModule[] = [
    ScheduleModule.forRoot(),
    TypeOrmModule.forRoot({ type: 'postgres', url: options.otherUrl ?? options.url }),
  ];
  if (named) imports.push(TypeOrmModule.forRoot({ name: named, type: 'postgres', url: options.url }));
  if (options.cls !== false) {
    imports.push(
      ClsModule.forRoot({
        global: true,
        plugins: [
          new ClsPluginTransactional({
            connectionName: options.hostOnDefault ? undefined : named,
            adapter: new TransactionalAdapterTypeOrm({
              dataSourceToken: getDataSourceToken(options.hostOnDefault ? undefined : named),
            }),
          }),
        ],
      }),
    );
  }
  imports.push(
    OutboxModule.forRoot({
      dataSource: named,
      transactionHost: named ? { connectionName: named } : true,
      ...options.outbox,
      relay: { enabled: false },
    }),
  );
  @Module({ providers: options.providers ?? [], exports: options.providers ?? [] })
  class FeatureModule {}
  const app = await Test.createTestingModule({ imports: [...imports, FeatureModule] })
    .setLogger(process.env.OUTBOX_TEST_LOGS ? new Logger() : quiet)
    .compile();
  await app.init();
  const relay = app.get(OutboxRelay);
  return {
    app,
    outbox: app.get(OutboxService),
    relay,
    close: async () => {
      await app.close();
      if (relay.isRunning) throw new Error('the relay is still running after app.close()');
    },
  };
}

async function refusal(work: Promise<unknown>): Promise<Error> {
  const error = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  return error as Error;
}

describe('transactions the way apps write them', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase(APP_TABLES);
  });
  afterAll(async () => {
    await db.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, 'contacts', 'timeline');
  });

  async function stored(): Promise<{ events: number; contacts: string[] }> {
    const [events] = await db.sql<{ n: number }>('select count(*)::int as n from event_outbox');
    const contacts = await db.sql<{ name: string }>('select name from contacts order by name');
    return { events: events.n, contacts: contacts.map((c) => c.name) };
  }

  describe('a QueryRunner with an open transaction', () => {
    let t: ClsApp;
    let dataSource: DataSource;
    beforeEach(async () => {
      t = await buildClsApp({ url: db.url, cls: false, outbox: { transactionHost: false } });
      dataSource = t.app.get(getDataSourceToken());
    });
    afterEach(() => t.close());

    it('commits the event with the writes, and the relay delivers it', async () => {
      const runner = dataSource.createQueryRunner();
      await runner.startTransaction();
      await runner.query("insert into contacts (name) values ('Ada')");
      await t.outbox.enqueue(runner, { tenantId: TENANT, eventName: 'test.contact.created.v1', payload: {} });
      await runner.commitTransaction();
      await runner.release();
      expect(await stored()).toEqual({ events: 1, contacts: ['Ada'] });
      expect((await t.relay.drain()).eventsClaimed).toBe(1);
    });

    it('leaves nothing of a rollback', async () => {
      const runner = dataSource.createQueryRunner();
      await runner.startTransaction();
      await runner.query("insert into contacts (name) values ('Ada')");
      await t.outbox.enqueueMany(runner, [
        { tenantId: TENANT, eventName: 'test.contact.created.v1', payload: {} },
      ]);
      await runner.rollbackTransaction();
      await runner.release();
      expect(await stored()).toEqual({ events: 0, contacts: [] });
    });

    it('refuses a runner with no open transaction, and a released one', async () => {
      const runner = dataSource.createQueryRunner();
      const idle = await refusal(
        t.outbox.enqueue(runner, { tenantId: TENANT, eventName: 'test.contact.created.v1', payload: {} }),
      );
      expect(idle).toBeInstanceOf(OutboxError);
      expect(idle.message).toContain('needs an open transaction');
      await runner.release();
      const released = await refusal(
        t.outbox.enqueue(runner, { tenantId: TENANT, eventName: 'test.contact.created.v1', payload: {} }),
      );
      expect(released.message).toContain('already released');
      expect(await stored()).toEqual({ events: 0, contacts: [] });
    });

    it('without the transactionHost option, enqueue with no manager says what to pass', async () => {
      const error = await refusal(
        t.outbox.enqueue({ tenantId: TENANT, eventName: 'test.contact.created.v1', payload: {} }),
      );
      expect(error).toBeInstanceOf(OutboxError);
      expect(error.message).toContain('without an EntityManager or QueryRunner');
    });
  });

  describe('@nestjs-cls/transactional: no manager at all', () => {
    let t: ClsApp;
    beforeEach(async () => {
      t = await buildClsApp({ url: db.url, providers: [ContactsService] });
    });
    afterEach(() => t.close());

    it('@Transactional(): the event commits with the writes and the relay delivers it', async () => {
      await t.app.get(ContactsService).create('Ada');
      expect(await stored()).toEqual({ events: 1, contacts: ['Ada'] });
      const round = await t.relay.drain();
      expect(round.eventsClaimed).toBe(1);
    });

    it('@Transactional(): a rollback leaves nothing', async () => {
      await expect(t.app.get(ContactsService).create('Ada', true)).rejects.toThrow('rolled back on purpose');
      expect(await stored()).toEqual({ events: 0, contacts: [] });
    });

    it('TransactionHost.withTransaction: commit, and rollback, with enqueueMany', async () => {
      const contacts = t.app.get(ContactsService);
      await contacts.createWithHost('Grace');
      await expect(contacts.createWithHost('Ada', true)).rejects.toThrow('rolled back on purpose');
      expect(await stored()).toEqual({ events: 1, contacts: ['Grace'] });
    });

    it('outside any transaction: the same error as a manager without one', async () => {
      const error = await refusal(t.app.get(ContactsService).outside('Ada'));
      expect(error).toBeInstanceOf(OutboxError);
      expect(error.message).toContain('needs an open transaction');
      expect(await stored()).toEqual({ events: 0, contacts: [] });
    });
  });

  describe('a handler whose code writes through the TransactionHost', () => {
    let t: ClsApp;
    beforeEach(async () => {
      t = await buildClsApp({
        url: db.url,
        providers: [ContactsService, TimelineRepository, TimelineConsumer],
      });
    });
    afterEach(() => t.close());

    it('writes in the delivery transaction: rolled back with a failed attempt, once on success', async () => {
      const eventId = await t.app.get(ContactsService).create('Ada');
      await t.relay.drain();
      // attempt 1 wrote a timeline row and enqueued a follow-up, then threw: neither is there
      expect(await db.sql('select * from timeline')).toEqual([]);
      const [followUps] = await db.sql<{ n: number }>(
        "select count(*)::int as n from event_outbox where event_name = 'test.timeline.added.v1'",
      );
      expect(followUps.n).toBe(0);
      await db.sql("update outbox_deliveries set next_attempt_at = now() where status = 'failed'");
      await t.relay.drain();
      expect(await db.sql('select event_id, attempt from timeline')).toEqual([
        { event_id: eventId, attempt: 2 },
      ]);
      const consumer = t.app.get(TimelineConsumer);
      expect(consumer.followUps).toEqual([eventId]);
      const [delivery] = await db.sql<{ status: string; attempt_count: number }>(
        "select status, attempt_count from outbox_deliveries where consumer_name = 'timeline'",
      );
      expect(delivery).toEqual({ status: 'delivered', attempt_count: 2 });
    });

    it('leaves the TransactionHost outside the handler as it was: no transaction', async () => {
      const host = t.app.get<TxHost>(TransactionHost);
      await t.app.get(ContactsService).create('Ada');
      await t.relay.drain();
      expect(host.isTransactionActive()).toBe(false);
    });
  });

  describe('a named DataSource (not the default) with a named TransactionHost', () => {
    let other: TestDatabase;
    let t: ClsApp;

    @Injectable()
    class CrmContacts {
      constructor(
        @InjectTransactionHost('crm') private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
        private readonly outbox: OutboxService,
      ) {}

      @Transactional('crm')
      async create(name: string, fail = false): Promise<void> {
        await this.txHost.tx.query('insert into contacts (name) values ($1)', [name]);
        await this.outbox.enqueue({
          tenantId: TENANT,
          eventName: 'test.contact.created.v1',
          payload: { name },
        });
        if (fail) throw new Error('rolled back on purpose');
      }
    }

    @Injectable()
    class CrmTimeline {
      constructor(@InjectTransactionHost('crm') private readonly txHost: TxHost) {}

      @OnOutboxEvent('test.contact.created.v1', { consumer: 'crm-timeline' })
      async record(event: OutboxEvent): Promise<void> {
        await this.txHost.tx.query('insert into timeline (event_id, attempt) values ($1, 1)', [
          event.eventId,
        ]);
      }
    }

    beforeAll(async () => {
      // the default DataSource points at another database: a write that went there would not be seen here
      other = await createTestDatabase(APP_TABLES);
    });
    afterAll(async () => {
      await other.drop();
    });
    beforeEach(async () => {
      t = await buildClsApp({
        url: db.url,
        otherUrl: other.url,
        named: 'crm',
        providers: [CrmContacts, CrmTimeline],
      });
    });
    afterEach(() => t.close());

    it('commits, delivers through the handler, rolls back, and refuses outside a transaction', async () => {
      const contacts = t.app.get(CrmContacts);
      await contacts.create('Ada');
      await expect(contacts.create('Grace', true)).rejects.toThrow('rolled back on purpose');
      await expect(
        t.outbox.enqueue({ tenantId: TENANT, eventName: 'test.contact.created.v1', payload: {} }),
      ).rejects.toThrow('needs an open transaction');
      await t.relay.drain();
      expect(await stored()).toEqual({ events: 1, contacts: ['Ada'] });
      expect(await db.sql('select attempt from timeline')).toEqual([{ attempt: 1 }]);
      const [otherEvents] = await other.sql<{ n: number }>('select count(*)::int as n from event_outbox');
      expect(otherEvents.n).toBe(0);
    });
  });

  describe('wiring mistakes, at boot', () => {
    it('lists a missing ClsModule plugin, naming the TransactionHost', async () => {
      const error = await refusal(
        buildClsApp({ url: db.url, cls: false, outbox: { transactionHost: { connectionName: 'crm' } } }),
      );
      expect(error).toBeInstanceOf(OutboxConfigurationError);
      expect((error as OutboxConfigurationError).problems).toEqual([
        expect.stringContaining('the TransactionHost "crm", which the app does not provide'),
      ]);
    });

    it('lists a TransactionHost that wraps another DataSource than the outbox', async () => {
      const other = await createTestDatabase();
      try {
        // the host wraps the default DataSource; the outbox writes through "crm"
        const error = await refusal(
          buildClsApp({
            url: db.url,
            otherUrl: other.url,
            named: 'crm',
            hostOnDefault: true,
            outbox: { transactionHost: true },
          }),
        );
        expect(error).toBeInstanceOf(OutboxConfigurationError);
        expect((error as OutboxConfigurationError).problems).toEqual([
          expect.stringContaining(
            'the default TransactionHost wraps another DataSource than the outbox\'s ("crm")',
          ),
        ]);
      } finally {
        await other.drop();
      }
    });
  });
});
