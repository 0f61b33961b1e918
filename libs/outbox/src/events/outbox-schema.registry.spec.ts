import * as v from 'valibot';
import { z } from 'zod';
import { OutboxInvalidPayloadError, OutboxValidationError } from '../errors/outbox.error';
import type { OutboxEvent } from '../model/outbox-event.interface';
import { defineOutboxEvents } from '../model/outbox-event-schemas';
import { OutboxSchemaRegistry } from './outbox-schema.registry';

const events = defineOutboxEvents({
  'crm.contact.created.v1': z.object({ contactId: z.uuid(), email: z.email(), tags: z.array(z.string()) }),
  'shop.order.placed': {
    1: v.object({ orderId: v.string(), total: v.number() }),
    2: v.object({ orderId: v.string(), total: v.object({ amount: v.number(), currency: v.string() }) }),
  },
  'shop.order.cancelled.v1': z.object({ orderId: z.string(), reason: z.string().default('unknown') }),
});
const registry = new OutboxSchemaRegistry({ events });
const contactId = '0b9f5c2e-3d4a-4b6c-8d7e-9f0a1b2c3d4e';

function envelope(eventName: string, data: unknown, schemaVersion = 1): OutboxEvent {
  return {
    eventId: '00000000-0000-4000-8000-000000000001',
    eventName,
    tenantId: '00000000-0000-4000-8000-000000000002',
    aggregateType: null,
    aggregateId: null,
    occurredAt: new Date(0),
    correlationId: null,
    schemaVersion,
    data: data as OutboxEvent['data'],
  };
}

/** `checkOnEnqueue` as `enqueue` awaits it: a throw or a rejection alike. */
async function onEnqueue(event: unknown, where: string): Promise<unknown> {
  return registry.checkOnEnqueue(event, where);
}

async function rejection(work: Promise<unknown>): Promise<OutboxValidationError> {
  const error = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboxValidationError);
  return error as OutboxValidationError;
}

describe('OutboxSchemaRegistry', () => {
  it('returns the schema output of a valid payload (zod fills its defaults)', async () => {
    await expect(
      onEnqueue({ eventName: 'shop.order.cancelled.v1', payload: { orderId: 'o1' } }, 'event'),
    ).resolves.toEqual({ orderId: 'o1', reason: 'unknown' });
  });

  it.each([null, 0, 1.5, '2'])(
    'refuses the schemaVersion %p before it can skip the schema',
    async (schemaVersion) => {
      const error = await rejection(
        onEnqueue({ eventName: 'shop.order.placed', schemaVersion, payload: { orderId: 'o1' } }, 'events[1]'),
      );
      expect(error.field).toBe('events[1].schemaVersion');
    },
  );

  it('names the path of a zod issue in the error field, under the event being enqueued', async () => {
    const error = await rejection(
      onEnqueue(
        {
          eventName: 'crm.contact.created.v1',
          payload: { contactId, email: 'ada@example.com', tags: ['vip', 7] },
        },
        'events[3]',
      ),
    );
    expect(error.field).toBe('events[3].payload.tags[1]');
    expect(error.message).toContain('"crm.contact.created.v1" (schemaVersion 1)');
  });

  it('checks each schemaVersion against its own valibot schema', async () => {
    const v2 = { orderId: 'o1', total: { amount: 5, currency: 'EUR' } };
    await expect(
      onEnqueue({ eventName: 'shop.order.placed', payload: { orderId: 'o1', total: 5 } }, 'event'),
    ).resolves.toEqual({ orderId: 'o1', total: 5 });
    await expect(
      onEnqueue({ eventName: 'shop.order.placed', schemaVersion: 2, payload: v2 }, 'event'),
    ).resolves.toEqual(v2);
    const error = await rejection(
      onEnqueue(
        { eventName: 'shop.order.placed', schemaVersion: 2, payload: { orderId: 'o1', total: 5 } },
        'event',
      ),
    );
    expect(error.field).toBe('event.payload.total');
  });

  it('refuses a version that has no schema, naming the versions there are', async () => {
    const error = await rejection(
      onEnqueue({ eventName: 'shop.order.placed', schemaVersion: 3, payload: {} }, 'event'),
    );
    expect(error.field).toBe('event.schemaVersion');
    expect(error.message).toContain('versions 1, 2');
  });

  it('leaves names without a schema, and malformed names, to the other checks, with no promise to await', () => {
    const payload = { anything: true };
    expect(registry.checkOnEnqueue({ eventName: 'other.thing.v1', payload }, 'event')).toBe(payload);
    expect(registry.checkOnEnqueue({ eventName: 42, payload }, 'event')).toBe(payload);
  });

  it('on receipt: a copy of the envelope with the output, synchronously for a synchronous schema', () => {
    const event = envelope('shop.order.cancelled.v1', { orderId: 'o1' });
    const checked = registry.checkOnReceipt(event);
    expect(checked).not.toBeInstanceOf(Promise);
    expect(checked).toEqual({ ...event, data: { orderId: 'o1', reason: 'unknown' } });
    expect(event.data).toEqual({ orderId: 'o1' });
  });

  it('on receipt: OutboxInvalidPayloadError with the path, for a bad payload or an unknown version', () => {
    const bad = () => registry.checkOnReceipt(envelope('shop.order.placed', { orderId: 1, total: 5 }));
    expect(bad).toThrow(OutboxInvalidPayloadError);
    expect(bad).toThrow(expect.objectContaining({ field: 'event.data.orderId', code: 'invalidPayload' }));
    expect(() => registry.checkOnReceipt(envelope('shop.order.placed', {}, 9))).toThrow(
      expect.objectContaining({ field: 'event.schemaVersion', code: 'invalidPayload' }),
    );
  });

  it('lists every malformed entry of the events option', () => {
    const wrong = new OutboxSchemaRegistry({
      events: {
        'Bad Name': z.string(),
        'a.b.v1': { parse: () => 1 },
        'a.c.v1': { 0: z.string() },
        'a.d.v1': { 1: z.string(), 2: 'a string' },
      } as never,
    });
    const problems = wrong.problems();
    expect(problems).toHaveLength(4);
    expect(problems[0]).toContain('events["Bad Name"]\'s name');
    expect(problems[1]).toContain('events["a.b.v1"] must be');
    expect(problems[2]).toContain('events["a.c.v1"] must be');
    expect(problems[3]).toContain('events["a.d.v1"][2] must be');
  });

  it('says which patterns some schema covers', () => {
    expect(registry.covers('shop.*')).toBe(true);
    expect(registry.covers('*')).toBe(true);
    expect(registry.covers('billing.*')).toBe(false);
  });
});
