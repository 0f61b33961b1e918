import { expectTypeOf } from 'expect-type';
import type { EntityManager } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxService,
  type OutboxEvent,
  type OutboxEventOf,
  type OutboxHandlerContext,
  type OutboxKnownEventName,
  type OutboxPayloadOf,
} from 'nestjs-pg-outbox';
import type { ContactCreated, ContactDeleted, OrderPlacedV1, OrderPlacedV2 } from './event-map';

declare const outbox: OutboxService;
declare const manager: EntityManager;
const tenantId = '7d0f2a43-5a8e-4c2b-9d0e-1f2a3b4c5d6e';

// Compiled, never run: the promises `void`ed below are never made.

// enqueue: a declared name takes its payload
void outbox.enqueue(manager, {
  tenantId,
  eventName: 'crm.contact.created.v1',
  payload: { contactId: 'c1', name: 'Ada' },
});
void outbox.enqueue(manager, {
  tenantId,
  eventName: 'crm.contact.created.v1',
  // @ts-expect-error a wrong payload: name must be a string
  payload: { contactId: 'c1', name: 42 },
});
// @ts-expect-error a payload missing a field
void outbox.enqueue(manager, { eventName: 'crm.contact.created.v1', payload: { contactId: 'c1' } });

// gradual: a name that is not declared takes any payload, as before the map
void outbox.enqueue(manager, { tenantId, eventName: 'crm.contact.craeted.v1', payload: { anything: 1 } });
const dynamicName: string = 'billing.invoice.paid.v1';
void outbox.enqueue(manager, { tenantId, eventName: dynamicName, payload: [1, 2] });

// versioned entries pair each payload with its schemaVersion; no schemaVersion means 1
void outbox.enqueue(manager, { eventName: 'shop.order.placed', payload: { orderId: 'o1', total: 10 } });
void outbox.enqueue(manager, {
  eventName: 'shop.order.placed',
  schemaVersion: 2,
  payload: { orderId: 'o1', total: { amount: 10, currency: 'EUR' } },
});
// @ts-expect-error version 2 with the payload of version 1
void outbox.enqueue(manager, {
  eventName: 'shop.order.placed',
  schemaVersion: 2,
  payload: { orderId: 'o1', total: 10 },
});
void outbox.enqueue(manager, {
  eventName: 'shop.order.placed',
  // @ts-expect-error version 3 is not declared
  schemaVersion: 3,
  payload: { orderId: 'o1', total: 10 },
});

// enqueueMany checks each element against its own name
void outbox.enqueueMany(manager, [
  { eventName: 'crm.contact.created.v1', payload: { contactId: 'c1', name: 'Ada' } },
  { eventName: 'crm.contact.deleted.v1', payload: { contactId: 'c1', reason: 'gdpr' } },
  { eventName: 'audit.anything.v1', payload: null },
]);
void outbox.enqueueMany(manager, [
  { eventName: 'crm.contact.created.v1', payload: { contactId: 'c1', name: 'Ada' } },
  // @ts-expect-error the payload of another declared name
  { eventName: 'crm.contact.deleted.v1', payload: { contactId: 'c1', name: 'Ada' } },
]);

// dedupe: an event with a key gets { eventId, outcome } back, one without its id, as before
expectTypeOf(
  outbox.enqueue(manager, { tenantId, eventName: 'audit.anything.v1', payload: 1, dedupe: { key: 'k' } }),
).resolves.toEqualTypeOf<{ eventId: string; outcome: 'written' | 'ignored' | 'replaced' | 'kept' }>();
expectTypeOf(
  outbox.enqueue(manager, { tenantId, eventName: 'audit.anything.v1', payload: 1 }),
).resolves.toBeString();
expectTypeOf(
  outbox.enqueueMany(manager, [
    { eventName: 'audit.anything.v1', payload: 1, dedupe: { key: 'k', mode: 'replace' } },
  ]),
).resolves.toEqualTypeOf<{ eventId: string; outcome: 'written' | 'ignored' | 'replaced' | 'kept' }[]>();
expectTypeOf(
  outbox.enqueueMany(manager, [{ eventName: 'audit.anything.v1', payload: 1 }]),
).resolves.toEqualTypeOf<string[]>();
// a declared name's payload is still checked with a key
void outbox.enqueue(manager, {
  eventName: 'crm.contact.created.v1',
  // @ts-expect-error a wrong payload: name must be a string
  payload: { contactId: 'c1', name: 42 },
  dedupe: { key: 'k' },
});
// @ts-expect-error an unknown mode
void outbox.enqueue(manager, {
  eventName: 'audit.anything.v1',
  payload: 1,
  dedupe: { key: 'k', mode: 'throttle' },
});

// OutboxEventOf: an exact name, a prefix (a union narrowed by eventName), everything, an undeclared name
expectTypeOf<OutboxEventOf<'crm.contact.created.v1'>['data']>().toEqualTypeOf<ContactCreated>();
expectTypeOf<
  OutboxEventOf<'crm.contact.created.v1'>['eventName']
>().toEqualTypeOf<'crm.contact.created.v1'>();
expectTypeOf<OutboxEventOf<'crm.contact.*'>['data']>().toEqualTypeOf<ContactCreated | ContactDeleted>();
expectTypeOf<OutboxEventOf<'crm.*'>['eventName']>().toEqualTypeOf<
  'crm.contact.created.v1' | 'crm.contact.deleted.v1'
>();
// every declared name, those of schemas.type-spec.ts included
expectTypeOf<OutboxEventOf<'*'>['eventName']>().toEqualTypeOf<OutboxKnownEventName>();
expectTypeOf<'shop.order.placed'>().toExtend<OutboxKnownEventName>();
expectTypeOf<OutboxEventOf<'billing.invoice.paid.v1'>>().toEqualTypeOf<OutboxEvent<unknown>>();
expectTypeOf<OutboxEventOf<'billing.*'>>().toEqualTypeOf<OutboxEvent<unknown>>();
expectTypeOf<OutboxPayloadOf<'shop.order.placed'>>().toEqualTypeOf<OrderPlacedV1 | OrderPlacedV2>();

function narrow(event: OutboxEventOf<'crm.contact.*'>): string {
  if (event.eventName === 'crm.contact.deleted.v1') {
    expectTypeOf(event.data).toEqualTypeOf<ContactDeleted>();
    return event.data.reason;
  }
  expectTypeOf(event.data).toEqualTypeOf<ContactCreated>();
  return event.data.name;
}
void narrow;

function byVersion(event: OutboxEventOf<'shop.order.placed'>): number {
  if (event.schemaVersion === 2) return event.data.total.amount;
  expectTypeOf(event.data).toEqualTypeOf<OrderPlacedV1>();
  return event.data.total;
}
void byVersion;

// @OnOutboxEvent: the first parameter must accept the name's envelope
export class Consumers {
  @OnOutboxEvent('crm.contact.created.v1')
  created(event: OutboxEventOf<'crm.contact.created.v1'>, context: OutboxHandlerContext): void {
    void event.data.name;
    void context.attempt;
  }

  @OnOutboxEvent('crm.contact.created.v1')
  createdAsEnvelope(event: OutboxEvent<ContactCreated>): void {
    void event;
  }

  @OnOutboxEvent('crm.contact.created.v1')
  noParameters(): void {}

  // @ts-expect-error the handler expects another payload than the name's
  @OnOutboxEvent('crm.contact.created.v1')
  mismatched(event: OutboxEvent<ContactDeleted>): void {
    void event;
  }

  // @ts-expect-error a prefix's handler must take every matching payload, not one of them
  @OnOutboxEvent('crm.contact.*')
  tooNarrow(event: OutboxEventOf<'crm.contact.created.v1'>): void {
    void event;
  }

  @OnOutboxEvent('crm.contact.*')
  everyContactEvent(event: OutboxEventOf<'crm.contact.*'>): void {
    void event;
  }

  @OnOutboxEvent('*')
  everything(event: OutboxEvent<unknown>): void {
    void event;
  }

  // gradual: a handler of an undeclared name is not checked
  @OnOutboxEvent('billing.invoice.paid.v1')
  untyped(event: OutboxEvent<{ invoiceId: string }>): void {
    void event;
  }
}
