import { v5 as uuidv5 } from 'uuid';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Namespace of the UUIDs derived from message ids that are not UUIDs. Fixed for good: changing it would make
 * every such message already received look new.
 */
const MESSAGE_ID_NAMESPACE = '86f0e22f-87c0-4b17-a4eb-eb0a63f036b3';

/**
 * The `event_id` under which a message is recorded: the message id itself when it is a UUID (an outbox event
 * id, so the row sits beside that event's delivery rows), else a UUIDv5 of it; and the id as sent, kept in
 * `message_id`, when that differs.
 */
export function inboxEventId(messageId: string): { eventId: string; messageId: string | null } {
  if (UUID_PATTERN.test(messageId)) return { eventId: messageId.toLowerCase(), messageId: null };
  return { eventId: uuidv5(messageId, MESSAGE_ID_NAMESPACE), messageId };
}
