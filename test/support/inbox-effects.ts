import type { OutboxInboxContext } from 'nestjs-pg-outbox/inbox';

/** Tenants of the inbox specs. */
export const TENANT_A = '0a0a0a0a-0000-4000-8000-0000000000a1';
export const TENANT_B = '0b0b0b0b-0000-4000-8000-0000000000b2';

/**
 * What inbox handlers write: one row per handler run that committed, with the tenants the handler could see in
 * this table (row-level security by the transaction's tenant, as for the outbox tables).
 */
export const INBOX_EFFECTS_SQL = [
  `create table inbox_effects (
     id bigint generated always as identity primary key,
     tenant_id uuid not null,
     consumer text not null,
     message_id text not null,
     attempt integer not null,
     visible_tenants uuid[] not null
   )`,
  `alter table inbox_effects enable row level security`,
  `create policy inbox_effects_tenant on inbox_effects to outbox_app, outbox_relay
     using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)
     with check (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)`,
];

/** The grant a test role needs on the effects table (`$ROLE`: see `createLoginRole`). */
export const INBOX_EFFECTS_GRANT = 'grant select, insert on inbox_effects to $ROLE';

/** Writes the effect of one handler run in the inbox transaction. */
export async function recordInboxEffect(context: OutboxInboxContext): Promise<void> {
  const visible: { tenant_id: string }[] = await context.manager.query(
    'select distinct tenant_id from inbox_effects order by tenant_id',
  );
  await context.manager.query(
    `insert into inbox_effects (tenant_id, consumer, message_id, attempt, visible_tenants)
     values ($1, $2, $3, $4, $5)`,
    [
      context.tenantId,
      context.consumer,
      context.messageId,
      context.attempt,
      visible.map((row) => row.tenant_id),
    ],
  );
}
