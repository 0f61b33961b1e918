import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import type { OutboxConsumerLimits } from '../../model/outbox-consumer';
import { consumerLimited } from './consumer-limits';

/**
 * Records that this instance hosts these consumers (insert or refresh), in one statement, with their limits: the
 * ones every relay's claims read. The limits are written only by an instance started (`startedAt`) no earlier than
 * the one whose limits the row holds (`limits_from`): during a rolling deploy, the newest instances' limits hold,
 * and an older instance's beat leaves them — while an instance started that late still reports (`heartbeatMs`:
 * one that missed three beats no longer counts). `startedAt` is null on an instance's first beat: it started now, by the
 * database's clock — one clock for every instance, so a host whose clock is off does not pass for newer or older.
 * Returns one row: `started_at`, the start to send in the instance's later beats, and `limited`, the names of these
 * consumers that the registry gives a limit now, whoever declared it
 * (docs/adr/1104-consumer-limits-in-the-database.md, "Amended 2026-12-06").
 */
export function heartbeatConsumers(
  n: OutboxNames,
  instanceId: string,
  consumers: readonly {
    name: string;
    eventNames: readonly string[];
    kind: string;
    ordered?: boolean;
    limits?: OutboxConsumerLimits;
  }[],
  startedAt: Date | null = null,
  heartbeatMs = 30_000,
): SqlStatement {
  // this instance started no earlier than the one whose limits the row holds, or no instance that started that
  // late still reports (it left, or missed three beats): a canary removed does not leave its limits behind
  const newer = `(r.limits_from is null or excluded.limits_from >= r.limits_from
                  or not exists (select 1 from ${n.consumerInstances} i
                                  where i.consumer_name = r.name and i.instance_id <> $1
                                    and i.started_at >= r.limits_from
                                    and i.last_seen_at > now() - $12::double precision * interval '1 millisecond'))`;
  const limit = (column: string) =>
    `${column} = case when ${newer} then excluded.${column} else r.${column} end`;
  return {
    text: `with c as (
             select name, string_to_array(patterns, ' ') as event_patterns, kind, ordered,
                    concurrency, tenant_concurrency, rate_limit, rate_interval_ms, rate_per_tenant, rate_key
               from unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::int[], $7::int[], $8::int[],
                           $9::int[], $10::boolean[], $13::text[])
                 as c(name, patterns, kind, ordered, concurrency, tenant_concurrency, rate_limit, rate_interval_ms,
                      rate_per_tenant, rate_key)
           ), upserted as (
             insert into ${n.consumers} as r (name, event_patterns, kind, ordered, concurrency, tenant_concurrency,
                                              rate_limit, rate_interval_ms, rate_per_tenant, rate_key, limits_from)
             select name, event_patterns, kind, ordered, concurrency, tenant_concurrency, rate_limit,
                    rate_interval_ms, rate_per_tenant, rate_key, coalesce($11::timestamptz, now()) from c
             on conflict (name) do update
               set event_patterns = excluded.event_patterns, kind = excluded.kind, ordered = excluded.ordered,
                   ${limit('concurrency')}, ${limit('tenant_concurrency')}, ${limit('rate_limit')},
                   ${limit('rate_interval_ms')}, ${limit('rate_per_tenant')}, ${limit('rate_key')},
                   limits_from = case when ${newer} then excluded.limits_from else r.limits_from end,
                   last_seen_at = now()
             returning r.name, ${consumerLimited('r')} as limited
           ), hosts as (
             insert into ${n.consumerInstances} (consumer_name, instance_id, started_at)
             select name, $1, coalesce($11::timestamptz, now()) from upserted
             on conflict (consumer_name, instance_id) do update
               set last_seen_at = now(), started_at = excluded.started_at
           )
           select coalesce($11::timestamptz, now()) as started_at,
                  array(select name from upserted where limited) as limited`,
    values: [
      instanceId,
      consumers.map((c) => c.name),
      consumers.map((c) => c.eventNames.join(' ')),
      consumers.map((c) => c.kind),
      consumers.map((c) => c.ordered === true),
      consumers.map((c) => c.limits?.concurrency ?? null),
      consumers.map((c) => c.limits?.tenantConcurrency ?? null),
      consumers.map((c) => c.limits?.rateLimit ?? null),
      consumers.map((c) => c.limits?.rateIntervalMs ?? null),
      consumers.map((c) => c.limits?.ratePerTenant === true),
      startedAt,
      3 * heartbeatMs,
      consumers.map((c) => c.limits?.rateKey ?? null),
    ],
  };
}

/** Removes this instance from the registry's host lists (at shutdown); the consumers stay registered. */
export function forgetInstance(n: OutboxNames, instanceId: string): SqlStatement {
  return { text: `delete from ${n.consumerInstances} where instance_id = $1`, values: [instanceId] };
}
