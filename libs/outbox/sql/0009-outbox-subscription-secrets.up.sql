-- nestjs-pg-outbox migration 0009-outbox-subscription-secrets (up), recorded from the TypeORM class OutboxSubscriptionSecrets1764450200000. Do not edit.
alter table public.outbox_webhook_subscriptions
        add column secret_key_id text,
        add column secret_sealed bytea,
        add constraint outbox_webhook_subscriptions_secret_check
          check ((secret_sealed is null) = (secret_key_id is null) and (secret_sealed is null or secret is null));
