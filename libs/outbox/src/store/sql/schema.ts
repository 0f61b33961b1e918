/**
 * The names of the outbox's tables, functions and wake-up channel, schema-qualified: the one place they are
 * spelled (the migrations, frozen history, spell their own).
 */

/** Schema of the outbox tables (created by the migrations). */
export const OUTBOX_SCHEMA = 'public';
export const EVENTS = `${OUTBOX_SCHEMA}.event_outbox`;
export const DELIVERIES = `${OUTBOX_SCHEMA}.outbox_deliveries`;
export const INBOX = `${OUTBOX_SCHEMA}.consumer_inbox`;
export const DUE_TENANTS = `${OUTBOX_SCHEMA}.outbox_due_tenants`;
export const CONSUMERS = `${OUTBOX_SCHEMA}.outbox_consumers`;
export const CONSUMER_INSTANCES = `${OUTBOX_SCHEMA}.outbox_consumer_instances`;
export const EVENT_LEASES = `${OUTBOX_SCHEMA}.outbox_event_leases`;

/** The channel relays LISTEN on for wake-ups. */
export const WAKEUP_CHANNEL = 'outbox_wakeup';
export const SUBSCRIPTIONS = `${OUTBOX_SCHEMA}.outbox_webhook_subscriptions`;
export const PURGE_SETTLED = `${OUTBOX_SCHEMA}.outbox_purge_settled`;
export const OLDEST_PENDING_AGE = `${OUTBOX_SCHEMA}.outbox_oldest_pending_age`;
export const LEASE_FENCE = `${OUTBOX_SCHEMA}.outbox_lease_fence`;
export const AUDIT = `${OUTBOX_SCHEMA}.outbox_audit`;
export const ACTIVITY = `${OUTBOX_SCHEMA}.outbox_activity`;
export const ROW_ESTIMATE = `${OUTBOX_SCHEMA}.outbox_row_estimate`;
export const RECORD_ACTIVITY = `${OUTBOX_SCHEMA}.outbox_record_activity`;
