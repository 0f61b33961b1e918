/** The wording of the inbox's errors and of the reasons it dead-letters a message it cannot process. */
export const inboxMessages = {
  missingOutbox: (): string =>
    'OutboxInboxModule needs the outbox: import OutboxModule.forRoot(…) (it finds the DataSource and the tenant ' +
    'setting) beside OutboxInboxModule.forRoot()',
  missingModule: (where: string): string =>
    `${where} uses @InboxHandler, but OutboxInbox is not provided: import OutboxInboxModule.forRoot() beside ` +
    'OutboxModule.forRoot(…) (it is global by default; with isGlobal: false, import it into this module)',
  sharedConsumer: (consumer: string, hosts: readonly string[]): string =>
    `${hosts.length} @InboxHandler methods are named ${quoted(consumer)} (${hosts.join(', ')}): each would take ` +
    "the other's messages for duplicates; give each its own consumer name",
  badConsumer: (where: string, value: unknown): string =>
    `${where} names the consumer ${quoted(value)}: give a string of 1 to 200 characters without control characters`,
  badMaxDeliveries: (where: string, value: unknown): string =>
    `${where} sets maxDeliveries to ${quoted(value)}: give an integer from 1 to 1000`,
  unsupportedTransport: (where: string): string =>
    `${where} received a message through a transport other than RabbitMQ (RmqContext) or NATS (NatsContext): ` +
    '@InboxHandler runs on @EventPattern handlers of those two; for another broker call OutboxInbox.handle ' +
    'with a message adapter of your own',
  noInboxContext: (): string =>
    '@InboxContext() has no inbox transaction to give: add @InboxHandler(consumer) to the same method',
  noMessageId: (): string =>
    'it has no message id (AMQP messageId property, JetStream Nats-Msg-Id header), so duplicates could not be told apart',
  badTenant: (header: string, value: string | undefined): string =>
    value === undefined
      ? `it has no ${header} header, which names the tenant to set for row-level security`
      : `its ${header} header is ${quoted(value)}, not a tenant UUID`,
  badPayload: (why: string): string => `its payload cannot be read: ${why}`,
  transactionControl: (consumer: string, what: string): string =>
    `handler ${consumer} tried ${what} through context.manager, which was refused: the inbox owns the message's ` +
    "transaction and commits it with the message's record; use context.manager.transaction() for a nested one",
  transactionLeftOpen: (consumer: string): string =>
    `handler ${consumer} returned with a nested transaction (queryRunner.startTransaction()) still open; ` +
    'commit or roll it back before returning, or use context.manager.transaction()',
  transactionEnded: (consumer: string): string =>
    `handler ${consumer} ended the message's transaction (COMMIT, ROLLBACK or the like on its connection); the ` +
    "inbox owns that transaction and commits it with the message's record: use context.manager.transaction() " +
    'for a nested one',
  tenantChanged: (consumer: string, tenantSetting: string, tenantId: string): string =>
    `handler ${consumer} changed ${tenantSetting} in the transaction of a message of tenant ${tenantId}; ` +
    "handlers run in their message's tenant context: to act for another tenant, open a transaction of your own",
};

function quoted(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  return value === undefined
    ? 'undefined'
    : typeof value === 'object'
      ? 'an object'
      : String(value as string | number | boolean | bigint | symbol | null);
}
