import { randomUUID } from 'node:crypto';
import { OutboxError } from 'nestjs-pg-outbox';
import {
  OUTBOX_MESSAGE_HEADERS,
  OutboxInbox,
  OutboxInboxModule,
  type OutboxInboxContext,
  type OutboxInboxMessage,
  type OutboxInboxOutcome,
} from 'nestjs-pg-outbox/inbox';
import { buildApp, type TestApp } from '../support/build-app';
import { INBOX_EFFECTS_GRANT, INBOX_EFFECTS_SQL, TENANT_A, TENANT_B } from '../support/inbox-effects';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';

const CONSUMER = 'ledger-sync';

/** The pg connection under TypeORM's runner: what a handler reaches behind `context.manager`'s back. */
type Driver = { databaseConnection: { query(text: string): Promise<unknown> } };

/** What a hostile handler does through `context.manager` between its two writes. */
const HOSTILE: Record<string, (c: OutboxInboxContext) => Promise<unknown>> = {
  'raw rollback': (c) => c.manager.query('rollback'),
  'raw commit': (c) => c.manager.query('commit'),
  'rollback, swallowed': (c) => c.manager.query('rollback').catch(() => undefined),
  'commit after a statement': (c) => c.manager.query('select 1; commit'),
  'queryRunner.commitTransaction()': (c) => c.manager.queryRunner!.commitTransaction(),
  'queryRunner.rollbackTransaction()': (c) => c.manager.queryRunner!.rollbackTransaction(),
  'queryRunner.release()': (c) => c.manager.queryRunner!.release(),
  'queryRunner.startTransaction() left open': (c) => c.manager.queryRunner!.startTransaction(),
  'rollback on the driver connection': (c) =>
    (c.manager.queryRunner as unknown as Driver).databaseConnection.query('rollback'),
};

/** What a handler may do: a nested transaction of its own (a savepoint), and a `do` block. */
const ALLOWED: Record<string, (c: OutboxInboxContext) => Promise<unknown>> = {
  'nested transaction': (c) => c.manager.transaction((inner) => write(inner, c, 'nested')),
  'do block': (c) => c.manager.query(`do $$ begin perform 1; end $$`),
};

async function write(
  manager: OutboxInboxContext['manager'],
  c: OutboxInboxContext,
  step: string,
): Promise<void> {
  await manager.query(
    `insert into inbox_effects (tenant_id, consumer, message_id, attempt, visible_tenants)
     values ($1, $2, $3, $4, '{}')`,
    [c.tenantId, step, c.messageId, c.attempt],
  );
}

/** One message, delivered as many times as `deliver` is called (a broker's redelivery or a re-publish). */
function brokerMessage(kind: string, tenantId = TENANT_A) {
  const id = randomUUID();
  let deliveries = 0;
  const deliver = (): OutboxInboxMessage => ({
    id,
    header: (name) => (name === OUTBOX_MESSAGE_HEADERS.tenant ? tenantId : undefined),
    deliveryCount: ++deliveries,
    payload: () => ({ kind }),
    ack: () => undefined,
    retry: () => undefined,
    deadLetter: () => undefined,
  });
  return { id, deliver };
}

/**
 * The inbox's transaction records the message with the handler's writes: a handler that ends it through
 * `context.manager` (COMMIT, ROLLBACK, the QueryRunner's own methods) is refused with an error naming it, as the
 * relay refuses it in a batch, and the message fails — nothing of the run is kept, and the record is not lost
 * (which would let the message run again with some effects already applied). Connected as the owner of the
 * tables, where row-level security does not fail the writes a lost transaction leaves without its tenant.
 */
describe('an inbox handler that tries to control the inbox transaction', () => {
  let db: TestDatabase;
  let app: TestApp;
  let inbox: OutboxInbox;

  beforeAll(async () => {
    db = await createTestDatabase(INBOX_EFFECTS_SQL);
    app = await buildApp({ url: db.url, imports: [OutboxInboxModule.forRoot({ maxDeliveries: 2 })] });
    inbox = app.app.get(OutboxInbox);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /**
   * Delivers the message twice; returns what was seen (outcomes, the handler's runs, the effects and the record
   * kept, connections left idle in a transaction), what the handler threw, and the record's last error.
   */
  const deliverTwice = async (kind: string, act: (c: OutboxInboxContext) => Promise<unknown>) => {
    const errors: unknown[] = [];
    const runs: number[] = [];
    const handler = async (_payload: unknown, c: OutboxInboxContext): Promise<void> => {
      runs.push(c.attempt);
      try {
        await write(c.manager, c, 'before');
        await act(c);
        await write(c.manager, c, 'after');
      } catch (error) {
        errors.push(error);
        throw error;
      }
    };
    const m = brokerMessage(kind);
    const outcomes: OutboxInboxOutcome[] = [];
    for (let i = 0; i < 2; i++) outcomes.push(await inbox.handle(CONSUMER, m.deliver(), handler));
    const effects = await db.sql<{ consumer: string; attempt: number }>(
      'select consumer, attempt from inbox_effects where message_id = $1 order by id',
      [m.id],
    );
    const records = await db.sql<{ status: string; attempts: number; last_error: string | null }>(
      'select status, attempts, last_error from consumer_inbox where event_id = $1',
      [m.id],
    );
    const open = await db.sql<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity
        where datname = current_database() and state like 'idle in transaction%'`,
    );
    const seen = {
      outcomes,
      runs,
      effects,
      status: records.map((r) => [r.status, r.attempts]),
      idleInTransaction: open[0]!.n,
    };
    return { seen, errors, lastError: records[0]?.last_error ?? null };
  };

  it.each(Object.keys(HOSTILE))(
    'refuses %s: the handler fails with an error naming it, nothing of its runs is kept, the message dead-letters',
    async (kind) => {
      const { seen, errors, lastError } = await deliverTwice(kind, HOSTILE[kind]!);
      expect(seen).toEqual({
        outcomes: ['retry', 'dead'],
        runs: [1, 2],
        effects: [],
        status: [['dead', 2]],
        idleInTransaction: 0,
      });
      expect(lastError).toMatch(new RegExp(`handler ${CONSUMER} `));
      expect(lastError).toMatch(/transaction|release/);
      // refused at the call (or, past the view, at the next write); the other two fail when the handler returns
      if (kind !== 'rollback, swallowed' && kind !== 'queryRunner.startTransaction() left open') {
        expect(errors[0]).toBeInstanceOf(OutboxError);
        expect((errors[0] as Error).message).toMatch(new RegExp(`handler ${CONSUMER} `));
      }
    },
    30_000,
  );

  it('finds a handler that rolled back on the driver connection and returned: nothing kept, the message dead-letters', async () => {
    const m = brokerMessage('rollback on the driver connection, then return');
    const handler = async (_payload: unknown, c: OutboxInboxContext): Promise<void> => {
      await write(c.manager, c, 'before');
      await (c.manager.queryRunner as unknown as Driver).databaseConnection.query('rollback');
    };
    const outcomes: OutboxInboxOutcome[] = [];
    for (let i = 0; i < 2; i++) outcomes.push(await inbox.handle(CONSUMER, m.deliver(), handler));
    expect(outcomes).toEqual(['retry', 'dead']);
    expect(await db.sql('select 1 from inbox_effects where message_id = $1', [m.id])).toEqual([]);
    const records = await db.sql<{ status: string; last_error: string }>(
      'select status, last_error from consumer_inbox where event_id = $1',
      [m.id],
    );
    expect(records).toEqual([
      { status: 'dead', last_error: expect.stringMatching(/ended the message's transaction/) },
    ]);
  });

  it('fails a handler that caught the error of a query and returned: its transaction is aborted, and its record is not lost', async () => {
    const m = brokerMessage('a failed query, caught');
    const handler = async (_payload: unknown, c: OutboxInboxContext): Promise<void> => {
      await write(c.manager, c, 'before');
      await c.manager.query('select 1 / 0').catch(() => undefined);
    };
    const outcomes: OutboxInboxOutcome[] = [];
    for (let i = 0; i < 2; i++) outcomes.push(await inbox.handle(CONSUMER, m.deliver(), handler));
    expect(outcomes).toEqual(['retry', 'dead']);
    expect(await db.sql('select 1 from inbox_effects where message_id = $1', [m.id])).toEqual([]);
    expect(await db.sql('select status, last_error from consumer_inbox where event_id = $1', [m.id])).toEqual(
      [{ status: 'dead', last_error: expect.stringMatching(/division by zero/) }],
    );
  });

  it('finds a handler that committed and began again on the driver connection: what it committed with the record stays, once; nothing after it does; it never runs again', async () => {
    const { seen } = await deliverTwice('commit and begin on the driver connection', (c) =>
      (c.manager.queryRunner as unknown as Driver).databaseConnection.query('commit; begin'),
    );
    expect(seen).toEqual({
      outcomes: ['duplicate', 'duplicate'],
      runs: [1],
      effects: [{ consumer: 'before', attempt: 1 }],
      status: [['processed', 1]],
      idleInTransaction: 0,
    });
  });

  it.each(Object.keys(ALLOWED))(
    'lets a handler use %s: its writes commit once, with the record',
    async (kind) => {
      const { seen } = await deliverTwice(kind, ALLOWED[kind]!);
      expect(seen.outcomes).toEqual(['processed', 'duplicate']);
      expect(seen.effects.map((e) => e.consumer)).toEqual(
        kind === 'nested transaction' ? ['before', 'nested', 'after'] : ['before', 'after'],
      );
      expect(seen.status).toEqual([['processed', 1]]);
    },
    30_000,
  );
});

/**
 * On a role under row-level security: the tenant setting is the message's for the whole transaction. A handler
 * that sets another tenant to write that tenant's rows fails, as in the relay's batch; session settings a
 * handler makes do not outlive its message on the pooled connection.
 */
describe("an inbox handler that changes the transaction's tenant or the session's settings", () => {
  let db: TestDatabase;
  let role: TestRole;
  let app: TestApp;
  let inbox: OutboxInbox;

  beforeAll(async () => {
    db = await createTestDatabase(INBOX_EFFECTS_SQL);
    role = await createLoginRole(db, 'outbox_app', [INBOX_EFFECTS_GRANT]);
    app = await buildApp({
      url: role.url,
      poolSize: 1,
      imports: [OutboxInboxModule.forRoot({ maxDeliveries: 1 })],
    });
    inbox = app.app.get(OutboxInbox);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
    await role?.drop();
  });

  it("fails a handler that switches to another tenant to write that tenant's rows", async () => {
    const m = brokerMessage('switch', TENANT_A);
    const outcome = await inbox.handle(CONSUMER, m.deliver(), async (_payload, c) => {
      await c.manager.query(`select set_config('app.current_tenant_id', $1, true)`, [TENANT_B]);
      await c.manager.query(
        `insert into inbox_effects (tenant_id, consumer, message_id, attempt, visible_tenants)
         values ($1, 'switched', $2, 1, '{}')`,
        [TENANT_B, c.messageId],
      );
    });
    expect(outcome).toBe('dead');
    expect(await db.sql('select tenant_id from inbox_effects where message_id = $1', [m.id])).toEqual([]);
    const [record] = await db.sql<{ tenant_id: string; last_error: string }>(
      'select tenant_id, last_error from consumer_inbox where event_id = $1',
      [m.id],
    );
    expect(record!.tenant_id).toBe(TENANT_A);
    expect(record!.last_error).toMatch(new RegExp(`handler ${CONSUMER} changed app.current_tenant_id`));
  });

  it('resets the session settings and role a handler changed before the connection goes back to the pool', async () => {
    const m = brokerMessage('settings', TENANT_A);
    const outcome = await inbox.handle(CONSUMER, m.deliver(), async (_payload, c) => {
      await c.manager.query(`set statement_timeout = 4321`);
      await c.manager.query(`set application_name = 'hostile'`);
    });
    expect(outcome).toBe('processed');
    // one pooled connection: the one the handler used
    const [after] = await app.dataSource.query<{ statement_timeout: string; application_name: string }[]>(
      `select current_setting('statement_timeout') as statement_timeout,
              current_setting('application_name') as application_name`,
    );
    expect(after!.statement_timeout).not.toBe('4321ms');
    expect(after!.application_name).not.toBe('hostile');
  });
});
