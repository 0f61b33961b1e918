/**
 * Statements on the webhook subscriptions table (and the delivery rows of a subscription), as `{ text, values }`.
 * Every one runs in a transaction with the tenant set, so row-level security applies to the relay role.
 */
import type { SqlStatement } from '../store/sql/statement';
import type { OutboxNames } from '../model/table-names';

/** A row of `outbox_webhook_subscriptions`. */
export interface SubscriptionRow {
  id: string;
  tenant_id: string;
  name: string;
  url: string;
  events: string[];
  /** Plaintext: only rows written before secrets were sealed (`resealSecrets` moves them). */
  secret: string | null;
  /** The key that sealed `secret_sealed`. */
  secret_key_id: string | null;
  /** AES-256-GCM `iv ‖ tag ‖ ciphertext` (see `SubscriptionSecretCipher`). */
  secret_sealed: Buffer | null;
  /** `headers`, `timeoutMs`, `maxAttempts`, `backoff`, `retryOn4xx`: what the tenant set, nothing merged. */
  options: Record<string, unknown>;
  status: 'active' | 'paused';
  created_at: Date;
  updated_at: Date;
}

/** The fields of a new subscription. */
export interface NewSubscription {
  id: string;
  tenantId: string;
  name: string;
  url: string;
  events: readonly string[];
  secretKeyId: string | null;
  secretSealed: Buffer | null;
  options: Record<string, unknown>;
}

/** A tenant's subscriptions, by name (one index probe on the unique key). */
export function tenantSubscriptions(n: OutboxNames, tenantId: string): SqlStatement {
  return { text: `select * from ${n.subscriptions} where tenant_id = $1 order by name`, values: [tenantId] };
}

/** One subscription of a tenant. */
export function subscriptionNamed(n: OutboxNames, tenantId: string, name: string): SqlStatement {
  return {
    text: `select * from ${n.subscriptions} where tenant_id = $1 and name = $2`,
    values: [tenantId, name],
  };
}

/** Adds a subscription; returns no row when the tenant already has one of that name. */
export function insertSubscription(n: OutboxNames, s: NewSubscription): SqlStatement {
  return {
    text: `insert into ${n.subscriptions} (id, tenant_id, name, url, events, secret_key_id, secret_sealed, options)
           values ($1, $2, $3, $4, $5::text[], $6, $7::bytea, $8::jsonb)
           on conflict (tenant_id, name) do nothing
           returning *`,
    values: [
      s.id,
      s.tenantId,
      s.name,
      s.url,
      s.events,
      s.secretKeyId,
      s.secretSealed,
      JSON.stringify(s.options),
    ],
  };
}

/** The tenant's subscriptions whose secret is in plaintext or sealed by another key than `keyId`. */
export function subscriptionsToReseal(n: OutboxNames, tenantId: string, keyId: string): SqlStatement {
  return {
    text: `select * from ${n.subscriptions}
            where tenant_id = $1 and (secret is not null or secret_key_id is distinct from $2 and secret_sealed is not null)
            order by name for update`,
    values: [tenantId, keyId],
  };
}

/** Stores a subscription's secret sealed again (and drops its plaintext). */
export function resealSubscriptionSecrets(
  n: OutboxNames,
  tenantId: string,
  ids: readonly string[],
  keyId: string,
  sealed: readonly Buffer[],
): SqlStatement {
  return {
    text: `update ${n.subscriptions} s
              set secret = null, secret_key_id = $3, secret_sealed = n.sealed, updated_at = now()
             from unnest($2::uuid[], $4::bytea[]) as n(id, sealed)
            where s.tenant_id = $1 and s.id = n.id`,
    values: [tenantId, ids, keyId, sealed],
  };
}

/**
 * Pauses or resumes a subscription. Resuming also makes due at once the deliveries that were held back while
 * it was paused (those the relay deferred with `subscriptionPaused`); deliveries waiting out a backoff keep it.
 */
export function setSubscriptionStatus(
  n: OutboxNames,
  tenantId: string,
  name: string,
  consumer: string,
  status: 'active' | 'paused',
): SqlStatement {
  return {
    text: `with s as (
             update ${n.subscriptions} set status = $3, updated_at = now()
              where tenant_id = $1 and name = $2
             returning *
           ), woken as (
             update ${n.deliveries} d set next_attempt_at = now(), updated_at = now()
              where $3 = 'active' and exists (select 1 from s)
                and d.tenant_id = $1 and d.consumer_name = $4 and d.status = 'pending' and d.error_code = 'subscriptionPaused'
                and d.next_attempt_at > now()
           )
           select * from s`,
    values: [tenantId, name, status, consumer],
  };
}

/**
 * Removes a subscription and what it is still owed: its delivery rows that wait (pending, failed, or
 * processing with an expired lease) are deleted and their events settled from the counters, as
 * `recordOutcomes` does — an event with no other open delivery becomes published (or stays failed when another
 * consumer dead-lettered it). Deliveries in flight under a live lease are left to their relay. Delivered and
 * dead rows stay as history.
 */
export function removeSubscription(
  n: OutboxNames,
  tenantId: string,
  name: string,
  consumer: string,
): SqlStatement {
  return {
    text: `with s as (
             delete from ${n.subscriptions} where tenant_id = $1 and name = $2 returning id
           ), dropped as (
             delete from ${n.deliveries} d
              where exists (select 1 from s) and d.tenant_id = $1 and d.consumer_name = $3
                and (d.status in ('pending', 'failed') or (d.status = 'processing' and d.lease_expires_at <= now()))
             returning d.event_id
           ), per_event as (
             select event_id, count(*)::int as n from dropped group by event_id
           ), settled as (
             update ${n.events} e
                set deliveries_open = e.deliveries_open - p.n,
                    status = case when e.deliveries_dead > 0 then 'failed'
                                  when e.deliveries_open - p.n = 0 then 'published'
                                  else e.status end,
                    published_at = case when e.deliveries_dead = 0 and e.deliveries_open - p.n = 0 then now() else e.published_at end,
                    updated_at = now()
               from per_event p
              where e.id = p.event_id
             returning e.id
           )
           select (select id from s) as id, (select count(*) from dropped)::int as dropped`,
    values: [tenantId, name, consumer],
  };
}
