import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Subscription secrets in the Standard Webhooks form. 0.1.0 used a secret without the `whsec_` prefix as its
 * UTF-8 bytes; the library now takes only `whsec_<base64>` (what the standard libraries read). A stored secret
 * without the prefix is rewritten as `whsec_` + the base64 of those same bytes: the HMAC key, and so every
 * receiver's verification, stays the same. Going down keeps the rewritten form, which 0.1.0 reads as the same
 * key. Frozen history: literal SQL.
 */
export class OutboxStandardSecrets1764450400000 implements MigrationInterface {
  name = 'OutboxStandardSecrets1764450400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      update public.outbox_webhook_subscriptions
         set secret = 'whsec_' || translate(encode(convert_to(secret, 'UTF8'), 'base64'), E'\\n', ''),
             updated_at = now()
       where secret is not null and not starts_with(secret, 'whsec_')`);
  }

  async down(): Promise<void> {
    // The rewritten secrets name the same keys for 0.1.0: nothing to undo.
  }
}
