import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** Records that this instance hosts these consumers (insert or refresh), in one statement. */
export function heartbeatConsumers(
  n: OutboxNames,
  instanceId: string,
  consumers: readonly { name: string; eventNames: readonly string[]; kind: string; ordered?: boolean }[],
): SqlStatement {
  return {
    text: `with c as (
             select name, string_to_array(patterns, ' ') as event_patterns, kind, ordered
               from unnest($2::text[], $3::text[], $4::text[], $5::boolean[]) as c(name, patterns, kind, ordered)
           ), upserted as (
             insert into ${n.consumers} (name, event_patterns, kind, ordered)
             select name, event_patterns, kind, ordered from c
             on conflict (name) do update
               set event_patterns = excluded.event_patterns, kind = excluded.kind, ordered = excluded.ordered, last_seen_at = now()
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
    ],
  };
}

/** Removes this instance from the registry's host lists (at shutdown); the consumers stay registered. */
export function forgetInstance(n: OutboxNames, instanceId: string): SqlStatement {
  return { text: `delete from ${n.consumerInstances} where instance_id = $1`, values: [instanceId] };
}
