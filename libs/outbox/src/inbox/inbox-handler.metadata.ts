import type { OutboxInboxConsumerOptions } from './outbox-inbox.interfaces';

/** Metadata key under which `@InboxHandler` records its consumer. */
export const OUTBOX_INBOX_HANDLER_METADATA = 'outbox:inbox-handler';

/** What `@InboxHandler` records on a method. */
export interface InboxHandlerMetadata {
  consumer: string;
  options: OutboxInboxConsumerOptions;
}

/** The `@InboxHandler` metadata of a method, if it has any (the one accessor of that metadata). */
export function inboxHandlerOf(method: unknown): InboxHandlerMetadata | undefined {
  if (typeof method !== 'function') return undefined;
  return Reflect.getMetadata(OUTBOX_INBOX_HANDLER_METADATA, method) as InboxHandlerMetadata | undefined;
}
