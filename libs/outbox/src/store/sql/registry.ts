import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import type { OutboxConsumerLimits } from '../../model/outbox-consumer';

/**
 * Records that this instance hosts these consumers (insert or refresh), in one statement, with their limits: the
 * ones every relay's claims read (the last instance to report a consumer sets them).
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
): SqlStatement {
  return {
    text: `with c as (
             select name, string_to_array(patterns, ' ') as event_patterns, kind, ordered,
                    concurrency, tenant_concurrency, rate_limit, rate_interval_ms, rate_per_tenant
               from unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::int[], $7::int[], $8::int[],
                           $9::int[], $10::boolean[])
                 as c(name, patterns, kind, ordered, concurrency, tenant_concurrency, rate_limit, rate_interval_ms,
                      rate_per_tenant)
           ), upserted as (
             insert into ${n.consumers} (name, event_patterns, kind, ordered, concurrency, tenant_concurrency,
                                         rate_limit, rate_interval_ms, rate_per_tenant)
             select name, event_patterns, kind, ordered, concurrency, tenant_concurrency, rate_limit,
                    rate_interval_ms, rate_per_tenant from c
             on conflict (name) do update
               set event_patterns = excluded.event_patterns, kind = excluded.kind, ordered = excluded.ordered,
                   concurrency = excluded.concurrency, tenant_concurrency = excluded.tenant_concurrency,
                   rate_limit = excluded.rate_limit, rate_interval_ms = excluded.rate_interval_ms,
                   rate_per_tenant = excluded.rate_per_tenant, last_seen_at = now()
             returning name
           )
           insert into ${n.consumerInstances} (consumer_name, instance_id)
           select name, $1 from upserted
           on conflict (consumer_name, instance_id) do update set last_seen_at = now()`,
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
    ],
  };
}

/** Removes this instance from the registry's host lists (at shutdown); the consumers stay registered. */
export function forgetInstance(n: OutboxNames, instanceId: string): SqlStatement {
  return { text: `delete from ${n.consumerInstances} where instance_id = $1`, values: [instanceId] };
}
