import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * An array of the consumers paused for tenant `tenantSql` (its own pauses and those of every tenant), for
 * `name <> all(...)`: uncorrelated, so PostgreSQL computes it once per statement (an InitPlan) and each row then
 * checks an array that is empty while nothing is paused — the claims' cost stays flat, in a generic plan too.
 * See docs/adr/1101-consumer-pauses-in-the-database.md.
 */
export function pausedConsumers(n: OutboxNames, tenantSql: string): string {
  return `array(select x.consumer_name from ${n.consumerPauses} x
                 where (x.tenant_id is null or x.tenant_id = ${tenantSql}) and ${IN_FORCE})`;
}

/**
 * A pause row `x` still in force: one without `resumes_at` lasts until resumed; a hold (a webhook's `Retry-After`,
 * see `holdPairs`) ends by itself. An expired hold stays until the pair is held or resumed again.
 */
const IN_FORCE = '(x.resumes_at is null or x.resumes_at > now())';

/**
 * For a delivery row `d` (an alias or a table name): its (consumer, tenant) pair is not paused. An anti-join on a
 * table that is empty while nothing is paused; in the due claim it keeps the plan of the statement without it,
 * where `pausedConsumers` made the planner pick a nested loop that cost 10–40 ms per claim
 * (docs/adr/1101-consumer-pauses-in-the-database.md).
 */
export function deliveryNotPaused(n: OutboxNames, d: string): string {
  return `not exists (select 1 from ${n.consumerPauses} x
                       where x.consumer_name = ${d}.consumer_name and (x.tenant_id is null or x.tenant_id = ${d}.tenant_id)
                         and ${IN_FORCE})`;
}

/** A row of `outbox_consumer_pauses`. */
export interface ConsumerPauseRow {
  consumer_name: string;
  tenant_id: string | null;
  paused_at: Date;
  paused_by: string | null;
  reason: string | null;
  /** When a hold ends by itself (a webhook's `Retry-After`); null: until resumed. */
  resumes_at: Date | null;
}

/**
 * Pauses `consumer` for `tenantId` (null: every tenant). One row per pair, kept as it was when the pair is
 * paused already (the caller holds the admin lock of the pair's tenant, so two pauses of a pair do not race); a
 * hold of the pair that would expire (see `holdPairs`) becomes this pause, until resumed. Returns the row
 * written, or none.
 */
export function pauseConsumer(
  n: OutboxNames,
  p: { consumer: string; tenantId: string | null; pausedBy: string | null; reason: string | null },
): SqlStatement {
  return {
    text: `insert into ${n.consumerPauses} as x (consumer_name, tenant_id, paused_by, reason)
           select $1::text, $2::uuid, $3::text, $4::text
            where not exists (select 1 from ${n.consumerPauses}
                               where consumer_name = $1::text and tenant_id is not distinct from $2::uuid
                                 and resumes_at is null)
           on conflict (consumer_name, tenant_id) do update
              set resumes_at = null, paused_at = now(), paused_by = excluded.paused_by, reason = excluded.reason
           returning consumer_name`,
    values: [p.consumer, p.tenantId, p.pausedBy, p.reason],
  };
}

/** Resumes `consumer` for `tenantId` (null: the pause of every tenant; a tenant's own pause stays). */
export function resumeConsumer(
  n: OutboxNames,
  p: { consumer: string; tenantId: string | null },
): SqlStatement {
  return {
    text: `delete from ${n.consumerPauses}
            where consumer_name = $1::text and tenant_id is not distinct from $2::uuid
           returning consumer_name`,
    values: [p.consumer, p.tenantId],
  };
}

/** The pauses in force that apply to `tenantId` (its own and every tenant's), or every pause (null), by consumer. */
export function consumerPauses(n: OutboxNames, tenantId: string | null): SqlStatement {
  return {
    text: `select consumer_name, tenant_id, paused_at, paused_by, reason, resumes_at from ${n.consumerPauses} x
            where ($1::uuid is null or tenant_id is null or tenant_id = $1::uuid) and ${IN_FORCE}
            order by consumer_name, tenant_id nulls first`,
    values: [tenantId],
  };
}

/** Whether the persisted registry (`outbox_consumers`) knows `name`: the consumers a pause may name. */
export function consumerKnown(n: OutboxNames, name: string): SqlStatement {
  return {
    text: `select exists (select 1 from ${n.consumers} where name = $1::text) as known`,
    values: [name],
  };
}

/**
 * Holds the (consumer, tenant) pairs of the rows of subquery `h` (`consumer_name`, `tenant_id`, `hold_ms`, `reason`) for
 * `hold_ms` from now: a pause that ends by itself (`resumes_at`), written by the relay when a webhook answers
 * `429`/`503` with `Retry-After` (docs/adr/1105-snooze.md). A pair paused until resumed stays so; a pair held
 * already is held until the later of the two ends. One row per pair (the pair's unique key), whichever relay
 * writes it.
 */
export function holdPairs(n: OutboxNames, h: string): string {
  return `insert into ${n.consumerPauses} as x (consumer_name, tenant_id, paused_by, reason, resumes_at)
             select consumer_name, tenant_id, 'relay', max(reason), statement_timestamp() + max(hold_ms) * interval '1 millisecond'
               from ${h} as h group by consumer_name, tenant_id
              -- in key order: two relays holding the same pairs lock their rows in one order
              order by consumer_name, tenant_id
             on conflict (consumer_name, tenant_id) do update
                set resumes_at = greatest(x.resumes_at, excluded.resumes_at),
                    paused_at = case when x.resumes_at > now() then x.paused_at else now() end,
                    reason = excluded.reason
              where x.resumes_at is not null`;
}
