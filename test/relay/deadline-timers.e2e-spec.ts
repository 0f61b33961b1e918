import { createHook } from 'node:async_hooks';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn } from '../support/outbox-fixture';

/*
 * The relay's round trips are bounded on the client side (`relay.roundTripTimeoutMs`, see RoundTripDeadline)
 * by one timer for all of them, not one each: a round of one event (the due-tenant scan, the claim, the closing:
 * three round trips) arms none of its own once the timer is armed (issue 35, ADR 1005's addendum of 2026-12-07).
 */

@Injectable()
class Plain {
  @OnOutboxEvent('test.plain.v1', { consumer: 'plain' })
  handle(): void {}
}

describe("the relay's round-trip deadlines", () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    // no wake-up NOTIFY and no schedule: the rounds are the test's own
    t = await buildApp({ url: db.url, providers: [Plain], outbox: { relay: { wakeUps: 'off' } } });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('arms no timer for the round trips of ten rounds of one event once one is armed', async () => {
    // a first round: the timer armed, connections and named statements made
    await enqueueIn(t, { eventName: 'test.plain.v1' });
    expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: 1, succeeded: 1 });
    let timers = 0;
    let counting = false;
    const hook = createHook({
      init: (_id, type) => {
        // the relay's deadlines' (pg-pool arms one of its own per connection released: not counted)
        if (counting && type === 'Timeout' && new Error().stack!.includes('round-trip-deadline')) timers++;
      },
    }).enable();
    let succeeded = 0;
    try {
      for (let round = 0; round < 10; round++) {
        await enqueueIn(t, { eventName: 'test.plain.v1' });
        counting = true;
        succeeded += (await t.relay.runOnce()).succeeded;
        counting = false;
      }
    } finally {
      hook.disable();
    }
    expect(succeeded).toBe(10);
    // three round trips per round, each with a timer of its own before: 30; the one armed in the first round
    // serves them all
    expect(timers).toBe(0);
  });
});
