import { createHmac } from 'node:crypto';
import { generateWebhookSecret, signWebhook, verifyWebhook, webhookSecretKey } from './webhook-signature';
import { OutboxWebhookVerificationError } from './webhook-verification.error';
import { OutboxValidationError } from '../errors/outbox.error';

describe('webhook signatures', () => {
  const secret = generateWebhookSecret();
  const body = JSON.stringify({ eventId: 'e-1', data: { a: 1 } });
  const now = new Date('2026-01-01T00:00:00Z');
  const timestamp = Math.floor(now.getTime() / 1000);
  const headersFor = (signature: string, ts = timestamp) => ({
    'webhook-id': 'e-1',
    'webhook-timestamp': String(ts),
    'webhook-signature': signature,
  });
  const reasonOf = (fn: () => unknown): string => {
    try {
      fn();
    } catch (error) {
      expect(error).toBeInstanceOf(OutboxWebhookVerificationError);
      return (error as OutboxWebhookVerificationError).reason;
    }
    throw new Error('did not throw');
  };

  it('signs `${id}.${timestamp}.${body}` with HMAC-SHA256 of the decoded whsec_ key, as Standard Webhooks does', () => {
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(`e-1.${timestamp}.${body}`).digest('base64');
    expect(signWebhook(webhookSecretKey(secret)!, 'e-1', timestamp, body)).toBe(`v1,${expected}`);
  });

  it('verifies a signed request and returns the parsed envelope', () => {
    const signature = signWebhook(webhookSecretKey(secret)!, 'e-1', timestamp, body);
    expect(verifyWebhook({ secret, headers: headersFor(signature), body, now })).toEqual({
      eventId: 'e-1',
      data: { a: 1 },
    });
    expect(
      verifyWebhook({ secret, headers: new Headers(headersFor(signature)), body: Buffer.from(body), now }),
    ).toEqual({ eventId: 'e-1', data: { a: 1 } });
  });

  it('accepts any of several signatures and several secrets (rotation)', () => {
    const other = generateWebhookSecret();
    const signature = `v1,bm90IGl0 ${signWebhook(webhookSecretKey(secret)!, 'e-1', timestamp, body)}`;
    expect(
      verifyWebhook({ secret: [other, secret], headers: headersFor(signature), body, now }),
    ).toBeTruthy();
  });

  it('refuses a wrong secret, a changed body, a stale timestamp and missing headers, saying which', () => {
    const signature = signWebhook(webhookSecretKey(secret)!, 'e-1', timestamp, body);
    expect(
      reasonOf(() =>
        verifyWebhook({ secret: generateWebhookSecret(), headers: headersFor(signature), body, now }),
      ),
    ).toBe('badSignature');
    expect(
      reasonOf(() =>
        verifyWebhook({ secret, headers: headersFor(signature), body: body.replace('1', '2'), now }),
      ),
    ).toBe('badSignature');
    const late = new Date(now.getTime() + 301_000);
    expect(reasonOf(() => verifyWebhook({ secret, headers: headersFor(signature), body, now: late }))).toBe(
      'staleTimestamp',
    );
    expect(reasonOf(() => verifyWebhook({ secret, headers: { 'webhook-id': 'e-1' }, body, now }))).toBe(
      'missingHeaders',
    );
    expect(
      reasonOf(() => verifyWebhook({ secret, headers: headersFor(signature, Number.NaN), body, now })),
    ).toBe('badTimestamp');
  });

  it('takes only whsec_ and strict base64 of at least 16 bytes, as Standard Webhooks reads a secret', () => {
    const sixteen = Buffer.from('0123456789abcdef');
    expect(webhookSecretKey(`whsec_${sixteen.toString('base64')}`)).toEqual(sixteen);
    expect(webhookSecretKey('0123456789abcdef0123456789abcdef')).toBeNull();
    expect(webhookSecretKey('short')).toBeNull();
    expect(webhookSecretKey('whsec_c2hvcnQ=')).toBeNull();
    expect(webhookSecretKey('whsec_not base64 at all, but long enough!')).toBeNull();
  });

  it('refuses a tolerance that is not a finite number of seconds ≥ 0, before looking at the request', () => {
    const old = new Date('1970-01-02T00:00:00Z');
    const ts = Math.floor(old.getTime() / 1000);
    const signature = signWebhook(webhookSecretKey(secret)!, 'e-1', ts, body);
    for (const toleranceSeconds of [NaN, Infinity, -Infinity, -1]) {
      expect(() =>
        verifyWebhook({ secret, headers: headersFor(signature, ts), body, now, toleranceSeconds }),
      ).toThrow(OutboxValidationError);
    }
  });
});
