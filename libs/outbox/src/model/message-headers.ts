/**
 * The names of the headers an outbox forwarder sends with each message and the inbox reads: one place, for both
 * sides. The message id is not a header on RabbitMQ: it is the AMQP `messageId` property (the outbox event id).
 * Values are text: the tenant and event ids as UUIDs, the schema version and attempt as decimal integers.
 */
export const OUTBOX_MESSAGE_HEADERS = {
  /** JetStream's message id header, the outbox event id: JetStream's duplicate window drops a re-publish. */
  natsMessageId: 'Nats-Msg-Id',
  /** The event name, e.g. `crm.contact.created.v1`: routes without parsing the body. */
  event: 'x-outbox-event',
  /** The tenant's UUID: the inbox sets it for row-level security in the handler's transaction. */
  tenant: 'x-outbox-tenant',
  /** `<aggregateType>:<aggregateId>`, absent when the event names no aggregate. */
  aggregate: 'x-outbox-aggregate',
  /** The event's correlation id, absent when it has none. */
  correlationId: 'x-outbox-correlation-id',
  /** The event's schema version. */
  schemaVersion: 'x-outbox-schema-version',
  /** The 1-based attempt of the outbox delivery that published this message (not the broker's redeliveries). */
  attempt: 'x-outbox-attempt',
} as const;
