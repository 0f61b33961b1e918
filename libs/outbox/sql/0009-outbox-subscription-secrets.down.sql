-- nestjs-pg-outbox migration 0009-outbox-subscription-secrets (down), recorded from the TypeORM class OutboxSubscriptionSecrets1764450200000. Do not edit.
do $$ begin
        if exists (select 1 from public.outbox_webhook_subscriptions where secret_sealed is not null) then
          raise exception 'outbox_webhook_subscriptions holds sealed secrets, which this migration cannot decrypt: remove those subscriptions (or their secrets) first';
        end if;
      end $$;

alter table public.outbox_webhook_subscriptions
        drop constraint outbox_webhook_subscriptions_secret_check,
        drop column secret_sealed,
        drop column secret_key_id;
