import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE_SQL,
  enqueueManyIn,
  recordEffect,
  TENANT,
} from '../support/outbox-fixture';

const SETTING = 'app.current_tenant_id';
const EVENT = 'test.session.v1';

/** What `a-changer` runs through `context.manager`, by the event's `kind`. */
const CHANGES: Record<string, string> = {
  role: 'set role outbox_relay',
  'read only': 'set default_transaction_read_only = on',
  'session tenant': `select set_config('${SETTING}', '${TENANT}', false)`,
  'search path': 'set search_path = pg_catalog',
  'local role': 'set local role outbox_relay',
};

/** What the next handler saw. */
interface Seen {
  kind: string;
  user: string;
  readOnly: string;
  searchPath: string;
}

@Injectable()
class SessionChangers {
  readonly seen: Seen[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'a-changer' })
  async change(event: OutboxEvent<{ kind: string }>, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    const change = CHANGES[event.data.kind];
    if (change) await context.manager.query(change);
  }

  /** Runs after the changer on each event: it must see the relay's own context. */
  @OnOutboxEvent(EVENT, { consumer: 'b-next' })
  async next(event: OutboxEvent<{ kind: string }>, context: OutboxHandlerContext): Promise<void> {
    const [row] = await context.manager.query(
      `select current_user as "user", current_setting('default_transaction_read_only') as "readOnly",
              current_setting('search_path') as "searchPath"`,
    );
    this.seen.push({ kind: event.data.kind, ...row });
    await recordEffect(event, context);
  }
}

/**
 * A handler's session-level settings (role, read-only default, tenant, search path) do not outlive it: the next
 * handler starts from the relay's context, and the pooled connection goes back as it was taken. The worker has
 * a pool of one connection, so the test's own queries through it see what the relay left.
 */
describe('settings a handler changes on the batch connection', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let producer: TestApp;
  let worker: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
    producer = await buildApp({ url: db.url });
    worker = await buildApp({ url: relayRole.url, providers: [SessionChangers], poolSize: 1 });
  });
  afterAll(async () => {
    await worker?.close();
    await producer?.close();
    await db?.drop();
    await relayRole?.drop();
  });

  const enqueue = (kinds: string[]): Promise<string[]> =>
    enqueueManyIn(
      producer,
      kinds.map((kind) => ({ eventName: EVENT, payload: { kind } })),
    );

  /** The pooled connection's session as the app would get it. */
  const session = () =>
    worker.dataSource
      .query(
        `select current_user as "user", session_user as "session", current_setting('default_transaction_read_only') as "readOnly",
                coalesce(current_setting($1, true), '') as tenant, current_setting('search_path') as "searchPath"`,
        [SETTING],
      )
      .then((rows: Record<string, string>[]) => rows[0]!);

  it('gives the next handler the relay’s context, and the pool its connection as it was taken', async () => {
    const before = await session();
    expect(before).toMatchObject({ user: relayRole.name, readOnly: 'off', tenant: '' });
    const kinds = Object.keys(CHANGES);
    await enqueue(kinds);
    const round = await worker.relay.drain();
    expect(round).toMatchObject({ failed: 0, dead: 0 });
    const seen = worker.app.get(SessionChangers).seen;
    expect(seen.map((s) => s.kind).sort()).toEqual([...kinds].sort());
    for (const s of seen)
      expect(s).toEqual({
        kind: s.kind,
        user: relayRole.name,
        readOnly: 'off',
        searchPath: before.searchPath,
      });
    expect(await session()).toEqual(before);

    // and the next batch (claim included) runs on that connection as usual
    const [id] = await enqueue(['none']);
    expect(await worker.relay.drain()).toMatchObject({ succeeded: 2, failed: 0 });
    expect(await db.sql('select count(*)::int as n from test_effects where event_id = $1', [id])).toEqual([
      { n: 2 },
    ]);
  });
});
