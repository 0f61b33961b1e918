/** The payload of `crm.contact.created.v1`. */
export type ContactCreated = {
  contactId: string;
  name: string;
  email: string;
};

// The demo's events, declared once: enqueue and the handlers below are checked against them.
declare module 'nestjs-pg-outbox' {
  interface OutboxEventMap {
    'crm.contact.created.v1': ContactCreated;
  }
}
