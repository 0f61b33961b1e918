import { Inject, Injectable } from '@nestjs/common';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { OUTBOX_WEBHOOKS_RESOLVED_OPTIONS } from './outbox-webhooks.module-definition';
import type { ResolvedOutboxWebhooksOptions } from './outbox-webhooks-options.interface';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const KEY_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** A subscription secret as stored: the id of the key that sealed it, and `iv ‖ tag ‖ ciphertext`. */
export interface SealedSecret {
  keyId: string;
  sealed: Buffer;
}

/**
 * Encrypts subscription secrets at rest with AES-256-GCM under the app's `subscriptions.secretKeys`
 * (`OutboxWebhooksModule`), so
 * a dump of the database alone does not reveal them. The first key seals; any key opens what it sealed
 * (rotation). The row's tenant and id are the additional data: a sealed secret copied to another row does not
 * open. See docs/adr/0201-subscription-secrets-at-rest.md.
 */
@Injectable()
export class SubscriptionSecretCipher {
  private readonly keys: { id: string; key: Buffer }[];

  constructor(@Inject(OUTBOX_WEBHOOKS_RESOLVED_OPTIONS) options: ResolvedOutboxWebhooksOptions) {
    // Bad keys are reported at boot (secretKeyProblems); the rest are usable meanwhile.
    this.keys = options.subscriptions.secretKeys.flatMap((k) => {
      const key = keyBytes(k?.key);
      return key && typeof k.id === 'string' ? [{ id: k.id, key }] : [];
    });
  }

  /** The id of the key that seals new secrets, or null when the app gave none. */
  get sealingKeyId(): string | null {
    return this.keys[0]?.id ?? null;
  }

  /** Seals a secret for one subscription row (`context`: its tenant and id). */
  seal(secret: string, context: string): SealedSecret {
    const current = this.keys[0];
    if (!current) throw new OutboxError(messages.subscriptionSecretNeedsKey());
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', current.key, iv).setAAD(Buffer.from(context, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return { keyId: current.id, sealed: Buffer.concat([iv, cipher.getAuthTag(), ciphertext]) };
  }

  /** Opens a sealed secret; throws `OutboxError` when its key is not configured or it does not authenticate. */
  open(secret: SealedSecret, context: string): string {
    const entry = this.keys.find((k) => k.id === secret.keyId);
    if (!entry) throw new OutboxError(messages.subscriptionSecretKeyMissing(secret.keyId));
    try {
      const decipher = createDecipheriv('aes-256-gcm', entry.key, secret.sealed.subarray(0, IV_BYTES))
        .setAAD(Buffer.from(context, 'utf8'))
        .setAuthTag(secret.sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(secret.sealed.subarray(IV_BYTES + TAG_BYTES)),
        decipher.final(),
      ]);
      return plain.toString('utf8');
    } catch {
      throw new OutboxError(messages.subscriptionSecretUnreadable(secret.keyId));
    }
  }
}

/** Every problem with `subscriptions.secretKeys`. */
export function secretKeyProblems(field: string, keys: unknown): string[] {
  if (!Array.isArray(keys)) return [messages.badOption(field, 'an array of { id, key }', keys)];
  const problems: string[] = [];
  const seen = new Set<string>();
  keys.forEach((entry: { id?: unknown; key?: unknown } | null, index) => {
    const at = `${field}[${index}]`;
    if (typeof entry?.id !== 'string' || !KEY_ID_PATTERN.test(entry.id))
      problems.push(messages.badOption(`${at}.id`, 'a name of 1 to 64 letters, digits and _ . -', entry?.id));
    else if (seen.has(entry.id))
      problems.push(messages.badOption(`${at}.id`, 'an id no other key has', entry.id));
    else seen.add(entry.id);
    if (!keyBytes(entry?.key))
      problems.push(
        messages.badOption(
          `${at}.key`,
          `${KEY_BYTES} bytes in base64 (openssl rand -base64 32), or a Buffer`,
          '(hidden)',
        ),
      );
  });
  return problems;
}

function keyBytes(key: unknown): Buffer | null {
  if (Buffer.isBuffer(key)) return key.length === KEY_BYTES ? key : null;
  if (typeof key !== 'string' || !/^[A-Za-z0-9+/]+={0,2}$/.test(key) || key.length % 4 !== 0) return null;
  const bytes = Buffer.from(key, 'base64');
  return bytes.length === KEY_BYTES ? bytes : null;
}
