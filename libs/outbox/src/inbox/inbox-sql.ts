/**
 * The statements of the inbox of broker messages (`OutboxInbox`), as `{ text, values }`. Each runs in a
 * transaction that set the message's tenant for row-level security (`setInboxTenant`).
 */
import type { OutboxNames } from '../model/table-names';
import type { SqlStatement } from '../store/sql/statement';
import { BATCH_MARKER } from '../store/sql/transaction-context';

/**
 * Sets the message's tenant for row-level security, transaction-local: nothing leaks to the pooled connection.
 * With a `marker`, also marks the transaction as the relay marks a batch's (`BATCH_MARKER`), so that
 * `batchGuard` tells it, before the commit, from a transaction a handler began after ending this one.
 */
export function setInboxTenant(tenantSetting: string, tenantId: string, marker?: string): SqlStatement {
  if (marker === undefined)
    return { text: `select set_config($1, $2, true)`, values: [tenantSetting, tenantId] };
  return {
    text: `select set_config($1, $2, true), set_config('${BATCH_MARKER}', $3, true)`,
    values: [tenantSetting, tenantId, marker],
  };
}

/**
 * The key of one message for one consumer: the message's tenant is part of it, so two tenants may send the same
 * message id (the primary key of `consumer_inbox`, see the migration `OutboxInboxTenantKey1764500400000`).
 */
export interface InboxKey {
  /** `event_id`: the message id, or a UUID derived from it (see `inboxEventId`). */
  eventId: string;
  consumer: string;
  tenantId: string;
  /** The message id as sent, when it is not the UUID in `eventId`. */
  messageId: string | null;
}

/** What `claimInboxMessage` returns when the message is this consumer's to process. */
export interface InboxClaimRow {
  /** The handler's runs on this message, this one included. */
  attempts: number;
}

/**
 * The first statement of the handler's transaction: records the message as processed for this consumer. A row
 * means "run the handler" (it commits with the handler's writes, or rolls back with them); no row means the
 * consumer processed it already: a duplicate.
 *
 * Locking: the primary key (message, consumer and tenant) serialises two deliveries of one message (a
 * redelivery while the first is still running): the second insert waits for the first transaction's row, then
 * sees it processed (no row) or, if it rolled back, inserts its own. A `retrying` or `dead` row (a failed run,
 * or a message dead-lettered and then published again) is taken over by the update. Another tenant's message
 * with the same id has a key of its own: under row-level security, a row the inbox could not see would fail the
 * insert instead of counting as a conflict.
 */
export function claimInboxMessage(n: OutboxNames, key: InboxKey): SqlStatement {
  return {
    text: `insert into ${n.inbox} as i (event_id, consumer_name, tenant_id, message_id, status, attempts,
                                      first_seen_at, last_seen_at, processed_at)
           values ($1, $2, $3, $4, 'processed', 1, now(), now(), now())
           on conflict (event_id, consumer_name, tenant_id) do update
              set status = 'processed', attempts = i.attempts + 1, last_seen_at = now(), processed_at = now()
            where i.status <> 'processed'
           returning i.attempts`,
    values: [key.eventId, key.consumer, key.tenantId, key.messageId],
  };
}

/** What `recordInboxFailure` returns: the row's state after this run failed. */
export interface InboxFailureRow {
  status: 'retrying' | 'dead';
  attempts: number;
}

/**
 * After the handler's transaction rolled back (or before it began, for a message that cannot be processed),
 * in a transaction of its own: counts the failed run and marks the message `dead` once `maxDeliveries` runs
 * failed (or at once when `dead` is true), else `retrying`. No row: the consumer has processed the message
 * meanwhile (a concurrent delivery committed): nothing failed.
 */
export function recordInboxFailure(
  n: OutboxNames,
  key: InboxKey,
  p: { error: string; maxDeliveries: number; dead: boolean },
): SqlStatement {
  return {
    text: `insert into ${n.inbox} as i (event_id, consumer_name, tenant_id, message_id, status, attempts, last_error,
                                      first_seen_at, last_seen_at, processed_at)
           values ($1, $2, $3, $4, case when $7::boolean or $6 <= 1 then 'dead' else 'retrying' end, 1, $5,
                   now(), now(), null)
           on conflict (event_id, consumer_name, tenant_id) do update
              set attempts = i.attempts + 1,
                  status = case when $7::boolean or i.attempts + 1 >= $6 then 'dead' else 'retrying' end,
                  last_error = excluded.last_error, last_seen_at = now()
            where i.status <> 'processed'
           returning i.status, i.attempts`,
    values: [key.eventId, key.consumer, key.tenantId, key.messageId, p.error, p.maxDeliveries, p.dead],
  };
}

/** Per consumer, one tenant's inbox rows not processed: retrying and dead. */
export interface InboxCountsRow {
  consumer_name: string;
  retrying: number;
  dead: number;
}

/**
 * One tenant's inbox rows that are not processed, by consumer (for `OutboxAdminService.stats`). Reads
 * `consumer_inbox_unsettled_idx` only: processed rows, every message ever received, are not counted.
 */
export function inboxCounts(n: OutboxNames, tenantId: string): SqlStatement {
  return {
    text: `select consumer_name, count(*) filter (where status = 'retrying')::int as retrying,
                  count(*) filter (where status = 'dead')::int as dead
             from ${n.inbox}
            where tenant_id = $1 and status <> 'processed'
            group by consumer_name
            order by consumer_name`,
    values: [tenantId],
  };
}
