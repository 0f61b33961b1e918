import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect, truncateOutbox } from '../support/outbox-fixture';

/*
 * ADR 1001: a handler changes the tenant through a function (past the relay's sight); the next handler, which fails
 * because it sees the wrong tenant, is not charged: the closing's guard finds the change and the careful run
 * charges the handler that made it.
 */

const SWITCH = 'test.optimistic.tenant.switch.v1';
const CHECK = 'test.optimistic.tenant.check.v1';
const OTHER = '00000000-0000-4000-8000-0000000000ff';

@Injectable()
class Handlers {
  @OnOutboxEvent(SWITCH, { consumer: 'switcher', maxAttempts: 3 })
  async switcher(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    await context.manager.query('select optimistic_switch()');
  }

  @OnOutboxEvent(CHECK, { consumer: 'checker', maxAttempts: 3 })
  async checker(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    const [row] = (await context.manager.query(
      `select current_setting('app.current_tenant_id', true) as t`,
    )) as { t: string }[];
    if (row!.t !== event.tenantId) throw new Error(`checker sees tenant ${row!.t}, not ${event.tenantId}`);
  }
}

describe.each([
  ['optimistic (default)', true],
  ['with a savepoint per handler', false],
])('a handler after one that changed the tenant through a function, %s', (_, optimisticBatches) => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      `create function optimistic_switch() returns void language sql as
         $$ select set_config('app.current_tenant_id', '${OTHER}', true) $$`,
    ]);
    t = await buildApp({
      url: db.url,
      providers: [Handlers],
      imports: [PolicySwitches.of({ optimisticBatches })],
    });
  });
  afterAll(async () => {
    await truncateOutbox(db);
    await t?.close();
    await db?.drop();
  });

  it('charges the switcher, not the handler after it', async () => {
    await enqueueManyIn(t, [
      { eventName: SWITCH, payload: {} },
      { eventName: CHECK, payload: {} },
    ]);
    await t.relay.runOnce();
    const rows = await db.sql<{
      consumer: string;
      status: string;
      attempts: number;
      last_error: string | null;
    }>(
      `select consumer_name as consumer, status, attempt_count as attempts, last_error from outbox_deliveries order by 1`,
    );
    const fx = await db.sql(`select consumer, count(*)::int as n from test_effects group by 1 order by 1`);
    expect(rows.map((r) => [r.consumer, r.status, r.attempts])).toEqual([
      ['checker', 'delivered', 1],
      ['switcher', 'failed', 1],
    ]);
    expect(fx).toEqual([{ consumer: 'checker', n: 1 }]);
  });
});
