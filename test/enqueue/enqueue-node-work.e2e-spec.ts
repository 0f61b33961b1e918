import { createHook } from 'node:async_hooks';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

/**
 * Promises one `enqueue` makes in an open transaction, its insert named and sent on the runner's connection (ADR
 * 1004's addendum of 2026-12-07): the call's own frame, the named insert's frame and pg's answer. Three async
 * layers more (the wake-up's carry step, the row-level-security wrapper and the named query's own frame, each a
 * promise and an `await`) made 13 with a promise hook on; without them, 7. A deterministic figure where CPU
 * timings are not.
 */
describe("enqueue's promises per call", () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    // no wake-up NOTIFY on the pool: the count is the transaction's own
    t = await buildApp({ url: db.url, outbox: { relay: { wakeUps: 'off' } } });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  beforeEach(() => truncateOutbox(db));

  /** PROMISE resources created while `work` runs (the async hook is on only meanwhile). */
  async function promisesOf(work: () => Promise<unknown>): Promise<number> {
    let made = 0;
    const hook = createHook({
      init: (_id, type) => {
        if (type === 'PROMISE') made++;
      },
    });
    hook.enable();
    try {
      await work();
    } finally {
      hook.disable();
    }
    return made;
  }

  it('makes at most 7 promises per enqueue once its named insert is prepared on the connection', async () => {
    const counts: number[] = [];
    await t.dataSource.transaction(async (manager) => {
      for (let i = 0; i < 5; i++) {
        const event = { tenantId: TENANT, eventName: 'test.node-work.v1', payload: { i } };
        counts.push(await promisesOf(() => t.outbox.enqueue(manager, event)));
      }
    });
    // the first prepares the statement on the connection (Parse); the rest send Bind/Execute only
    expect(Math.max(...counts.slice(1))).toBeLessThanOrEqual(7);
    expect((await db.sql<{ n: string }>('select count(*) n from event_outbox'))[0]!.n).toBe('5');
  });
});
