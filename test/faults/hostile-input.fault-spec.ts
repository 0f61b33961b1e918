import { Injectable, type CanActivate } from '@nestjs/common';
import { OnOutboxEvent, OutboxValidationError, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxAdminModule } from 'nestjs-pg-outbox/admin';
import { buildApp, type TestApp } from '../support/build-app';
import { buildHttpApp, type HttpTestApp } from '../support/http-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';

const A = 'f0000000-0000-4000-8000-00000000000a';
const B = 'f0000000-0000-4000-8000-00000000000b';

@Injectable()
class Sink {
  readonly seen: string[] = [];
  @OnOutboxEvent('fault.hostile.v1', { consumer: 'sink' })
  take(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }
}

class AllowAll implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

/** Builds an object nested `depth` levels deep without recursion. */
function nested(depth: number): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let cursor = root;
  for (let i = 0; i < depth; i++) cursor = cursor.next = {};
  return root;
}

describe('fault: hostile and malformed input through the public API and the admin endpoints', () => {
  let db: TestDatabase;
  let t: TestApp;
  let http: HttpTestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({
      url: db.url,
      providers: [Sink],
      outbox: { relay: { enabled: true, pollIntervalMs: 50 } },
    });
    http = await buildHttpApp({ url: db.url, imports: [OutboxAdminModule.forRoot({ guards: [AllowAll] })] });
  });
  afterAll(async () => {
    await http?.close();
    await t?.close();
    await db?.drop();
  });

  const rows = async (): Promise<number> =>
    (
      await db.sql<{ n: number }>(
        `select ((select count(*) from event_outbox) + (select count(*) from outbox_deliveries))::int n`,
      )
    )[0]!.n;

  it('refuses each with a clear error naming the field, writes nothing partial, and the relay keeps running', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const valid = { tenantId: A, eventName: 'fault.hostile.v1', payload: { ok: true } };
    const enqueueCases: [string, unknown][] = [
      ['BigInt', { ...valid, payload: { n: 1n } }],
      ['cycle', { ...valid, payload: cyclic }],
      ['function', { ...valid, payload: { f() {} } }],
      ['symbol value', { ...valid, payload: { s: Symbol('x') } }],
      ['undefined payload', { ...valid, payload: undefined }],
      ['Date', { ...valid, payload: { at: new Date() } }],
      ['Buffer', { ...valid, payload: { b: Buffer.from('x') } }],
      ['NaN', { ...valid, payload: { x: NaN } }],
      ['Infinity', { ...valid, payload: { x: -Infinity } }],
      ['NUL in a string', { ...valid, payload: { s: 'a\u0000' } }],
      ['NUL in a key', { ...valid, payload: { 'a\u0000': 1 } }],
      ['lone surrogate', { ...valid, payload: { s: 'x\udc00' } }],
      ['10 MB payload', { ...valid, payload: { blob: 'x'.repeat(10 * 1024 * 1024) } }],
      ['100,000 levels deep', { ...valid, payload: nested(100_000) }],
      ['event name with SQL', { ...valid, eventName: "x.y'); delete from event_outbox; --" }],
      ['event name with a newline', { ...valid, eventName: 'crm.contact\n.created' }],
      ['event name with a NUL', { ...valid, eventName: 'crm.contact.\u0000' }],
      ['event name of 10,000 characters', { ...valid, eventName: `crm.${'a'.repeat(10_000)}` }],
      ['non-ASCII event name', { ...valid, eventName: 'crm.contäct.created' }],
      ['tenant id with SQL', { ...valid, tenantId: "' or 1=1 --" }],
      ['tenant id as a number', { ...valid, tenantId: 42 }],
      ['null event', null],
      ['array as event', [valid]],
      ['aggregate id of 1,000 characters', { ...valid, aggregateId: 'x'.repeat(1000) }],
      ['schema version 1.5', { ...valid, schemaVersion: 1.5 }],
      ['occurredAt as a string', { ...valid, occurredAt: '2026-01-01' }],
    ];
    const before = await rows();
    let tried = 0;
    for (const [label, input] of enqueueCases) {
      tried++;
      const error = await t.dataSource
        .transaction((m) => t.outbox.enqueue(m, input as never))
        .catch((e: unknown) => e);
      expect([label, error]).toEqual([label, expect.any(OutboxValidationError)]);
      expect((error as OutboxValidationError).field).toMatch(/^event/);
    }
    for (const [label, input] of [
      ['not an array', { events: valid }],
      ['one bad event among good ones', [valid, valid, { ...valid, payload: { n: 1n } }, valid]],
    ] as const) {
      tried++;
      const error = await t.dataSource
        .transaction((m) => t.outbox.enqueueMany(m, input as never))
        .catch((e: unknown) => e);
      expect([label, error]).toEqual([label, expect.any(OutboxValidationError)]);
    }
    expect(await rows()).toBe(before);

    // The admin endpoints: bad parameters answer 400 naming the field; another tenant's ids change nothing.
    const other = await t.dataSource.transaction((m) => t.outbox.enqueue(m, { ...valid, tenantId: B }));
    const get = async (path: string, init?: RequestInit) => {
      const response = await fetch(`${http.baseUrl}/outbox${path}`, init);
      return {
        status: response.status,
        body: (await response.json().catch(() => null)) as Record<string, unknown> | null,
      };
    };
    const httpCases: [string, string, RequestInit | undefined, number, string | null][] = [
      ['tenant not a UUID', `/tenants/nope/stats`, undefined, 400, 'tenantId'],
      ['tenant with SQL', `/tenants/${encodeURIComponent("' or 1=1 --")}/stats`, undefined, 400, 'tenantId'],
      ['limit negative', `/tenants/${A}/failed?limit=-1`, undefined, 400, 'limit'],
      ['limit huge', `/tenants/${A}/failed?limit=1000000000`, undefined, 400, 'limit'],
      [
        'limit with SQL',
        `/tenants/${A}/failed?limit=${encodeURIComponent('1; drop table event_outbox')}`,
        undefined,
        400,
        'limit',
      ],
      ['offset negative', `/tenants/${A}/failed?offset=-5`, undefined, 400, 'offset'],
      ['offset not a number', `/tenants/${A}/failed?offset=abc`, undefined, 400, 'offset'],
      [
        'event name filter malformed',
        `/tenants/${A}/failed?eventName=${encodeURIComponent('x%')}`,
        undefined,
        400,
        'eventName',
      ],
      ['event id not a UUID', `/tenants/${A}/events/123/deliveries`, undefined, 400, 'eventId'],
      [
        'replay body not JSON',
        `/tenants/${A}/replay`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"consumer":' },
        400,
        null,
      ],
    ];
    for (const [label, path, init, status, field] of httpCases) {
      tried++;
      const answer = await get(path, init);
      expect([label, answer.status]).toEqual([label, status]);
      if (field) expect([label, answer.body?.field]).toEqual([label, field]);
    }
    tried += 2;
    expect(await get(`/tenants/${A}/events/${other}/deliveries`)).toMatchObject({ status: 404 });
    expect(await get(`/tenants/${A}/events/${other}/replay`, { method: 'POST' })).toMatchObject({
      status: 200,
      body: { reset: 0 },
    });

    // The relay kept running through all of it.
    const id = await t.dataSource.transaction((m) => t.outbox.enqueue(m, valid));
    await waitFor(() => t.app.get(Sink).seen.includes(id), {
      timeoutMs: 10_000,
      message: 'the relay to deliver after the hostile input',
    });
    console.log(
      `[faults] hostile input: ${tried} inputs tried, all refused with a clear error, nothing partial written, relay running`,
    );
  });
});
