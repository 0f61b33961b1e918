import type { EntityManager } from 'typeorm';
import { OnOutboxEvent, OutboxService, type OutboxEventOf } from 'nestjs-pg-outbox';
import './event-map';

declare const outbox: OutboxService;
declare const manager: EntityManager;

// Compiled, never run: the promises `void`ed below are never made.

void outbox.enqueue(manager, {
  eventName: 'crm.contact.created.v1',
  payload: { contactId: 'c1', name: 'Ada' },
});
void outbox.enqueue(manager, {
  // @ts-expect-error strict: a misspelled name does not compile
  eventName: 'crm.contact.craeted.v1',
  payload: { contactId: 'c1', name: 'Ada' },
});
const dynamicName: string = 'crm.contact.created.v1';
// @ts-expect-error strict: a name typed only as string does not compile either
void outbox.enqueue(manager, { eventName: dynamicName, payload: { contactId: 'c1', name: 'Ada' } });
void outbox.enqueueMany(manager, [
  { eventName: 'crm.contact.created.v1', payload: { contactId: 'c1', name: 'Ada' } },
  // @ts-expect-error strict: an undeclared name in a batch
  { eventName: 'crm.contact.merged.v1', payload: { contactId: 'c1', name: 'Ada' } },
]);

export class StrictConsumers {
  @OnOutboxEvent('crm.contact.created.v1')
  created(event: OutboxEventOf<'crm.contact.created.v1'>): void {
    void event;
  }

  @OnOutboxEvent('crm.*')
  everyCrmEvent(event: OutboxEventOf<'crm.*'>): void {
    void event;
  }

  // @ts-expect-error strict: a misspelled name in the decorator
  @OnOutboxEvent('crm.contact.craeted.v1')
  misspelled(): void {}
}
