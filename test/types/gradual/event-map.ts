// The event map of this type-test program (gradual: names not declared stay allowed).
import type { OutboxVersioned } from 'nestjs-pg-outbox';

export type ContactCreated = { contactId: string; name: string };
export interface ContactDeleted {
  contactId: string;
  reason: 'merged' | 'gdpr';
}
export type OrderPlacedV1 = { orderId: string; total: number };
export type OrderPlacedV2 = { orderId: string; total: { amount: number; currency: string } };

declare module 'nestjs-pg-outbox' {
  interface OutboxEventMap {
    'crm.contact.created.v1': ContactCreated;
    'crm.contact.deleted.v1': ContactDeleted;
    'shop.order.placed': OutboxVersioned<{ 1: OrderPlacedV1; 2: OrderPlacedV2 }>;
  }
}
