import { Injectable } from '@nestjs/common';
import * as v from 'valibot';
import { z } from 'zod';
import {
  defineOutboxEvents,
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxValidationError,
  type OutboxEvent,
} from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

/** v1 put the whole name in one field; v2 splits it. One schema per version, zod for one, valibot for the other. */
const events = defineOutboxEvents({
  'crm.contact.created': {
    1: z.object({ contactId: z.string(), name: z.string().min(1) }),
    2: v.object({ contactId: v.string(), givenName: v.string(), familyName: v.string() }),
  },
  'crm.note.added.v1': z.object({
    noteId: z.string(),
    text: z.string().max(20),
    pinned: z.boolean().default(false),
  }),
});

/** The consumer of both versions, side by side: it reads the version and handles each shape. */
@Injectable()
class ContactDirectory {
  readonly names: string[] = [];
  readonly notes: unknown[] = [];
  unvalidatedCalls = 0;

  @OnOutboxEvent('crm.contact.created', { consumer: 'directory', validatePayload: true })
  created(event: OutboxEvent<unknown>): void {
    const data = event.data as { name?: string; givenName?: string; familyName?: string };
    this.names.push(event.schemaVersion === 1 ? data.name! : `${data.givenName} ${data.familyName}`);
  }

  @OnOutboxEvent('crm.note.added.v1', { consumer: 'notes', validatePayload: true, maxAttempts: 5 })
  noted(event: OutboxEvent<unknown>): void {
    this.notes.push(event.data);
  }

  /** Does not ask for validation: it receives whatever was stored. */
  @OnOutboxEvent('crm.note.added.v1', { consumer: 'raw-notes' })
  raw(): void {
    this.unvalidatedCalls++;
  }
}

describe('payload schemas', () => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db);
    t = await buildApp({ url: db.url, outbox: { events }, providers: [ContactDirectory] });
  });
  afterEach(async () => {
    await t.close();
  });

  async function count(): Promise<number> {
    const [row] = await db.sql<{ n: number }>('select count(*)::int as n from event_outbox');
    return row.n;
  }

  it('refuses a payload its schema rejects, naming the path, and writes nothing of the batch', async () => {
    const error = await t.dataSource
      .transaction((manager) =>
        t.outbox.enqueueMany(manager, [
          { tenantId: TENANT, eventName: 'crm.contact.created', payload: { contactId: 'c1', name: 'Ada' } },
          {
            tenantId: TENANT,
            eventName: 'crm.contact.created',
            schemaVersion: 2,
            payload: { contactId: 'c2', givenName: 'Grace' },
          },
        ]),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxValidationError);
    expect((error as OutboxValidationError).field).toBe('events[1].payload.familyName');
    expect(await count()).toBe(0);
  });

  describe('a schemaVersion that is not a positive integer', () => {
    // each would otherwise skip the schema (null was stored as version 1, its payload unchecked)
    const bad: unknown[] = [null, 0, -1, 1.5, '2', Number.NaN];
    // a versioned name, a name with one schema for every version, and a name without schema
    const cases = [
      { eventName: 'crm.contact.created', payload: { contactId: 'c1' } },
      { eventName: 'crm.note.added.v1', payload: { noteId: 'n1', text: 'far too long for a note' } },
      { eventName: 'crm.contact.merged.v1', payload: {} },
    ];

    it.each(bad)('refuses %p in enqueue, naming the field, and writes nothing', async (schemaVersion) => {
      for (const event of cases) {
        const error = await t.dataSource
          .transaction((manager) =>
            t.outbox.enqueue(manager, { tenantId: TENANT, ...event, schemaVersion } as never),
          )
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OutboxValidationError);
        expect((error as OutboxValidationError).field).toBe('event.schemaVersion');
        expect((error as Error).message).toContain('positive integer');
      }
      expect(await count()).toBe(0);
    });

    it.each(bad)(
      'refuses %p in enqueueMany, naming the event, and writes none of the batch',
      async (schemaVersion) => {
        for (const event of cases) {
          const error = await t.dataSource
            .transaction((manager) =>
              t.outbox.enqueueMany(manager, [
                {
                  tenantId: TENANT,
                  eventName: 'crm.contact.created',
                  payload: { contactId: 'c0', name: 'Ada' },
                },
                { tenantId: TENANT, ...event, schemaVersion } as never,
              ]),
            )
            .catch((e: unknown) => e);
          expect(error).toBeInstanceOf(OutboxValidationError);
          expect((error as OutboxValidationError).field).toBe('events[1].schemaVersion');
        }
        expect(await count()).toBe(0);
      },
    );

    it('still treats a missing schemaVersion as 1, and checks it against the version 1 schema', async () => {
      const error = await t.dataSource
        .transaction((manager) =>
          t.outbox.enqueue(manager, {
            tenantId: TENANT,
            eventName: 'crm.contact.created',
            schemaVersion: undefined,
            payload: { contactId: 'c1' } as never,
          }),
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxValidationError);
      expect((error as OutboxValidationError).field).toBe('event.payload.name');
      expect(await count()).toBe(0);
    });
  });

  it('stores the schema output (defaults filled in), so every consumer reads the same shape', async () => {
    await t.dataSource.transaction((manager) =>
      t.outbox.enqueue(manager, {
        tenantId: TENANT,
        eventName: 'crm.note.added.v1',
        payload: { noteId: 'n1', text: 'call back' },
      }),
    );
    const [row] = await db.sql<{ payload: unknown }>('select payload from event_outbox');
    expect(row.payload).toEqual({ noteId: 'n1', text: 'call back', pinned: false });
  });

  it('delivers v1 and v2 of one event side by side, as a producer moves from one to the other', async () => {
    const directory = t.app.get(ContactDirectory);
    // the producer before its upgrade…
    await t.dataSource.transaction((manager) =>
      t.outbox.enqueue(manager, {
        tenantId: TENANT,
        eventName: 'crm.contact.created',
        payload: { contactId: 'c1', name: 'Ada Lovelace' },
      }),
    );
    // …and after: version 2, while version 1 events may still be waiting for delivery
    await t.dataSource.transaction((manager) =>
      t.outbox.enqueue(manager, {
        tenantId: TENANT,
        eventName: 'crm.contact.created',
        schemaVersion: 2,
        payload: { contactId: 'c2', givenName: 'Grace', familyName: 'Hopper' },
      }),
    );
    await t.relay.drain();
    expect(directory.names).toEqual(['Ada Lovelace', 'Grace Hopper']);
    const versions = await db.sql<{ schema_version: number }>(
      'select schema_version from event_outbox order by seq',
    );
    expect(versions.map((r) => r.schema_version)).toEqual([1, 2]);
  });

  it('dead-letters a payload that fails validation on receipt at once (invalidPayload), without a retry', async () => {
    // written around the schema (another producer, an older version of this app): the consumer still checks it
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload) values
        ('0190a0a0-0000-7000-8000-000000000001', $1, 'crm.note.added.v1', '{"noteId":"n1","text":"far too long for a note"}')`,
      [TENANT],
    );
    const result = await t.relay.drain();
    expect(result.dead).toBe(1);
    const rows = await db.sql<{
      consumer_name: string;
      status: string;
      error_code: string | null;
      attempt_count: number;
      last_error: string | null;
    }>(
      'select consumer_name, status, error_code, attempt_count, last_error from outbox_deliveries order by consumer_name',
    );
    expect(rows).toEqual([
      expect.objectContaining({
        consumer_name: 'notes',
        status: 'dead',
        error_code: 'invalidPayload',
        attempt_count: 1,
      }),
      expect.objectContaining({ consumer_name: 'raw-notes', status: 'delivered', error_code: null }),
    ]);
    expect(rows[0].last_error).toContain('event.data.text');
    const directory = t.app.get(ContactDirectory);
    expect(directory.notes).toEqual([]);
    expect(directory.unvalidatedCalls).toBe(1);
  });
});

describe('payload schemas at boot', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  @Injectable()
  class Unchecked {
    @OnOutboxEvent('billing.invoice.paid.v1', { validatePayload: true })
    paid(): void {}
  }

  it('lists a malformed events option and a consumer that validates against no schema', async () => {
    const error = await buildApp({
      url: db.url,
      outbox: { events: { 'crm.contact.created.v1': { parse: () => true } } as never },
      providers: [Unchecked],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    const problems = (error as OutboxConfigurationError).problems;
    expect(problems).toEqual([
      expect.stringContaining('events["crm.contact.created.v1"] must be a Standard Schema'),
      expect.stringContaining('Unchecked#paid asks for validatePayload'),
    ]);
  });
});
