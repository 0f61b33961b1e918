import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Subscription secrets sealed at rest: `secret_sealed` holds AES-256-GCM's `iv ‖ tag ‖ ciphertext` under the
 * app's key named by `secret_key_id` (see docs/adr/0201-subscription-secrets-at-rest.md); the plaintext
 * `secret` column stays only for rows written before, until `resealSecrets()` moves them. Going down refuses
 * while sealed secrets exist: the database cannot decrypt them, and dropping them would silently unsign
 * deliveries. Frozen history: literal SQL.
 */
export class OutboxSubscriptionSecrets1764450200000 implements MigrationInterface {
  name = 'OutboxSubscriptionSecrets1764450200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      alter table public.outbox_webhook_subscriptions
        add column secret_key_id text,
        add column secret_sealed bytea,
        add constraint outbox_webhook_subscriptions_secret_check
          check ((secret_sealed is null) = (secret_key_id is null) and (secret_sealed is null or secret is null))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      do $$ begin
        if exists (select 1 from public.outbox_webhook_subscriptions where secret_sealed is not null) then
          raise exception 'outbox_webhook_subscriptions holds sealed secrets, which this migration cannot decrypt: remove those subscriptions (or their secrets) first';
        end if;
      end $$`);
    await q.query(`
      alter table public.outbox_webhook_subscriptions
        drop constraint outbox_webhook_subscriptions_secret_check,
        drop column secret_sealed,
        drop column secret_key_id`);
  }
}
