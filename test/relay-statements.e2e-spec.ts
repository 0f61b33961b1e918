import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from '@app/outbox';
import { inlineStatement } from '../libs/outbox/src/store/inline-statement';
import { buildApp, type TestApp } from './support/build-app';
import { createTestDatabase, type TestDatabase } from './support/test-database';

const TENANT = '77777777-7777-4777-8777-777777777777';

/** Throws the message its event carries: the relay records it as the delivery's last error. */
@Injectable()
class Thrower {
  @OnOutboxEvent('test.throw.v1', { consumer: 'thrower', maxAttempts: 5 })
  handle(event: OutboxEvent<{ message: string }>): void {
    throw new Error(event.data.message);
  }
}

/**
 * The relay sends each transaction's statements together in one round trip, with values written into the SQL
 * as escaped literals. Whatever a value holds, it must reach the table as it was, and never be read as SQL.
 */
describe('relay statements sent in one round trip', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({ url: db.url, providers: [Thrower] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it.each([
    ['quotes', `it's "quoted"`],
    ['backslashes', String.raw`C:\temp\new \' \\`],
    ['SQL in the text', `'); drop table event_outbox; -- $1 $2 /* */ $$ ;commit;`],
    ['unicode', 'ünïcødé ✓ 𝄞 — 北京'],
    ['a parameter marker', '$1'],
  ])('records an error with %s exactly as thrown', async (_, message) => {
    const id = await t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId: TENANT, eventName: 'test.throw.v1', payload: { message } }),
    );
    const round = await t.relay.runOnce();
    expect(round.failed).toBe(1);
    const [row] = await db.sql<{ last_error: string; error_code: string }>(
      'select last_error, error_code from outbox_deliveries where event_id = $1',
      [id],
    );
    expect(row).toEqual({ last_error: `Error: ${message}`, error_code: 'handlerError' });
    expect(await db.sql('select count(*)::int as n from event_outbox')).not.toEqual([{ n: 0 }]);
  });

  it('writes arrays that PostgreSQL reads as it reads the same values sent as parameters', async () => {
    const arrays: unknown[][] = [
      ['5eb0a1c4-0000-4000-8000-000000000001', 'bench.notify', 'webhook:crm', 'a_b@c+d', '-', '.'],
      ['', 'NULL', 'null', 'Null', ' padded ', 'a b', 'tab\there', 'new\nline'],
      [`it's`, '"quoted"', String.raw`back\slash`, String.raw`\"`, '{braces}', 'a,b', '$1', 'ünï 𝄞'],
      [null, undefined, 'x', null],
      [1, -2, 3.5, 0],
      [true, false, null],
      [],
    ];
    for (const array of arrays) {
      const [inlined] = await db.sql<{ v: string[] }>(
        inlineStatement({ text: 'select $1::text[] as v', values: [array] }),
      );
      const [sent] = await db.sql<{ v: string[] }>('select $1::text[] as v', [array]);
      expect(inlined!.v).toEqual(sent!.v);
    }
  });
});
