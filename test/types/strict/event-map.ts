// The event map of the strict type-test program: only declared names compile.
export type ContactCreated = { contactId: string; name: string };

declare module 'nestjs-pg-outbox' {
  interface OutboxEventMap {
    'crm.contact.created.v1': ContactCreated;
  }
  interface OutboxStrictEventNames {
    strict: true;
  }
}
