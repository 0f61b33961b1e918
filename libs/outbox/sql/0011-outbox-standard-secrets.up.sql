-- nestjs-pg-outbox migration 0011-outbox-standard-secrets (up), recorded from the TypeORM class OutboxStandardSecrets1764450400000. Do not edit.
update public.outbox_webhook_subscriptions
         set secret = 'whsec_' || translate(encode(convert_to(secret, 'UTF8'), 'base64'), E'\n', ''),
             updated_at = now()
       where secret is not null and not starts_with(secret, 'whsec_');
