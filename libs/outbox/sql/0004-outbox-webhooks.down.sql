-- nestjs-pg-outbox migration 0004-outbox-webhooks (down), recorded from the TypeORM class OutboxWebhooks1764428700000. Do not edit.
revoke all on public.outbox_webhook_subscriptions from outbox_relay;

drop table if exists public.outbox_webhook_subscriptions;
