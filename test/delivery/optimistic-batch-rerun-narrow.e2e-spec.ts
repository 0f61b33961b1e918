import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { OutboxInstrumentation } from '../../libs/outbox/src/extension/outbox-instrumentation';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect, truncateOutbox } from '../support/outbox-fixture';

/*
 * ADR 1001: a rerun whose batch then fails at commit (a later handler's deferred constraint) is narrowed; observers
 * see each delivery's attempt once net of the rollbacks reported, and the narrowing runs every handler again, the
 * one the rerun kept failed among them (as with a savepoint per handler).
 */

const FAIL = 'test.optimistic.rn.fail.v1';
const DUP = 'test.optimistic.rn.dup.v1';

@Injectable()
class Handlers {
  readonly calls = new Map<string, number>();

  @OnOutboxEvent(FAIL, { consumer: 'picky', maxAttempts: 3 })
  async picky(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.calls.set('picky', (this.calls.get('picky') ?? 0) + 1);
    await recordEffect(event, context);
    throw new Error('picky refuses');
  }

  @OnOutboxEvent(DUP, { consumer: 'dup', maxAttempts: 3 })
  async dup(_: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.calls.set('dup', (this.calls.get('dup') ?? 0) + 1);
    await context.manager.query('insert into optimistic_once values (1), (1)');
  }
}

describe.each([
  ['optimistic (default)', true],
  ['with a savepoint per handler', false],
])('a rerun whose batch then fails at commit, %s', (_, optimisticBatches) => {
  let db: TestDatabase;
  let t: TestApp;
  let ended = 0;
  let rolledBack = 0;
  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      'create table optimistic_once (id int, constraint optimistic_once_u unique (id) deferrable initially deferred)',
    ]);
    t = await buildApp({
      url: db.url,
      providers: [Handlers],
      imports: [PolicySwitches.of({ optimisticBatches })],
    });
    t.app.get(OutboxInstrumentation).add({
      batchRolledBack: ({ deliveries }) => {
        rolledBack += deliveries;
      },
      attemptStarted: () => ({
        ended: () => {
          ended++;
        },
      }),
    });
  });
  afterAll(async () => {
    await truncateOutbox(db);
    await t?.close();
    await db?.drop();
  });

  it('observes each attempt once net of rollbacks, and calls the failed handler once', async () => {
    await enqueueManyIn(t, [
      { eventName: FAIL, payload: {} },
      { eventName: DUP, payload: {} },
    ]);
    await t.relay.runOnce();
    const rows = await db.sql<{ consumer: string; status: string; attempts: number }>(
      `select consumer_name as consumer, status, attempt_count as attempts from outbox_deliveries order by 1`,
    );
    const calls = t.app.get(Handlers).calls;
    expect(rows.map((r) => [r.consumer, r.status, r.attempts])).toEqual([
      ['dup', 'failed', 1],
      ['picky', 'failed', 1],
    ]);
    expect(ended - rolledBack).toBe(2);
    // narrowing runs every handler of the batch again, the one a rerun kept failed among them, in either mode
    expect(calls.get('picky')).toBe(2);
  });
});
