import { randomBytes } from 'node:crypto';
import { OutboxValidationError } from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { generateWebhookSecret, OutboxWebhookSubscriptions, verifyWebhook } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { enqueueIn, truncateOutbox } from '../support/outbox-fixture';

const A = '1b2c3d4e-5f60-4a1b-8c2d-3e4f5a6b7c8d';
const B = '2c3d4e5f-6071-4b2c-9d3e-4f5a6b7c8d9e';
const LOOPBACK_ONLY = { allowPrivateTargets: ['127.0.0.1/32'] };
const key = (id: string) => ({ id, key: randomBytes(32).toString('base64') });

describe('tenant webhook subscriptions and the private network', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  const apps: TestApp[] = [];
  const app = async (subscriptions: object): Promise<TestApp> => {
    const t = await buildApp({
      url: db.url,
      webhooks: { subscriptions: { cacheTtlMs: 1, ...subscriptions } },
    });
    apps.push(t);
    return t;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
  });
  afterEach(async () => {
    for (const t of apps.splice(0)) await t.close();
    await truncateOutbox(db, 'outbox_webhook_subscriptions');
    receiver.requests.length = 0;
    receiver.reply = () => ({});
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.drop();
  });

  const enqueue = (t: TestApp, tenantId: string) =>
    enqueueIn(t, { tenantId, eventName: 'test.ssrf.probe.v1' });
  const deliveryOf = async (eventId: string) =>
    (
      await db.sql<{ status: string; error_code: string | null; last_error: string | null }>(
        'select status, error_code, last_error from outbox_deliveries where event_id = $1',
        [eventId],
      )
    )[0];

  it('refuses private targets in add(), in every spelling, naming the url', async () => {
    const port = new URL(receiver.baseUrl).port;
    const subscriptions = (await app({})).app.get(OutboxWebhookSubscriptions);
    const targets = [
      receiver.baseUrl,
      `http://localhost:${port}/`,
      'http://[::1]/',
      'http://0x7f000001/',
      'http://2130706433/',
      'http://0/',
      'http://0.0.0.0/',
      'http://169.254.169.254/latest/meta-data/',
      'http://metadata.google.internal/computeMetadata/v1/',
      'http://10.1.2.3/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://100.64.0.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[fd00:ec2::254]/',
      'http://[fe80::1]/',
      'http://[::]/',
      'https://127.0.0.1:5432',
    ];
    for (const url of targets) {
      const refused = await subscriptions
        .add(A, { name: 'probe', url, events: ['*'] })
        .catch((e: unknown) => e);
      expect([url, refused]).toEqual([url, expect.any(OutboxValidationError)]);
      expect((refused as OutboxValidationError).field).toBe('url');
    }
    expect(await subscriptions.list(A)).toEqual([]);
  });

  it('refuses at send time a stored subscription whose host resolves to a private address (DNS rebinding)', async () => {
    const t = await app({});
    const port = new URL(receiver.baseUrl).port;
    // Rows as a DNS change (or a hand edit) leaves them: they passed add() once, and now point inside.
    for (const [name, url] of [
      ['named', `http://localhost:${port}/named`],
      ['literal', `${receiver.baseUrl}/literal`],
    ]) {
      await db.sql(
        `insert into outbox_webhook_subscriptions (id, tenant_id, name, url, events) values (gen_random_uuid(), $1, $2, $3, '{*}')`,
        [A, name, url],
      );
    }
    const id = await enqueue(t, A);
    await t.relay.drain();
    expect(receiver.requests).toEqual([]);
    const rows = await db.sql<{ consumer_name: string; status: string; error_code: string }>(
      'select consumer_name, status, error_code from outbox_deliveries where event_id = $1 order by consumer_name',
      [id],
    );
    expect(rows).toEqual([
      { consumer_name: 'subscription:literal', status: 'failed', error_code: 'targetRefused' },
      { consumer_name: 'subscription:named', status: 'failed', error_code: 'targetRefused' },
    ]);
  });

  it('lets the operator allow ranges, and keeps the response body out of what the tenant reads back unless allowed', async () => {
    receiver.reply = () => ({
      status: 500,
      body: 'internal: db password is hunter2\n\u001b[31mforged log line',
    });
    for (const responseBodyInErrors of [false, true]) {
      const t = await app({ ...LOOPBACK_ONLY, responseBodyInErrors });
      const subscriptions = t.app.get(OutboxWebhookSubscriptions);
      await subscriptions.add(A, {
        name: `hook-${responseBodyInErrors}`,
        url: `${receiver.baseUrl}/in`,
        events: ['*'],
      });
      const id = await enqueue(t, A);
      await t.relay.drain();
      expect(receiver.to('/in')).toHaveLength(1);
      const delivery = await deliveryOf(id);
      expect(delivery).toMatchObject({ status: 'failed', error_code: 'httpStatus' });
      const [readBack] = (await t.app.get(OutboxAdminService).deliveries(A, id))!.deliveries;
      expect(readBack!.lastError).toBe(delivery!.last_error);
      if (responseBodyInErrors) {
        expect(delivery!.last_error).toContain('hunter2');
        // eslint-disable-next-line no-control-regex -- a raw line break or escape would forge a log line
        expect(delivery!.last_error).not.toMatch(/[\n\u001b]/);
        expect(delivery!.last_error).toContain('\\n\\u001b[31m');
      } else {
        expect(delivery!.last_error).toBe('HTTP 500 Internal Server Error');
      }
      await subscriptions.remove(A, `hook-${responseBodyInErrors}`);
      await t.close();
      apps.splice(0);
      receiver.requests.length = 0;
    }
  });

  it('stores secrets sealed under the app key, signs with them, and reseals them under a new key', async () => {
    const refused = await (
      await app(LOOPBACK_ONLY)
    ).app
      .get(OutboxWebhookSubscriptions)
      .add(A, {
        name: 'signed',
        url: `${receiver.baseUrl}/s`,
        events: ['*'],
        secret: generateWebhookSecret(),
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OutboxValidationError);
    expect((refused as OutboxValidationError).field).toBe('secret');
    expect((refused as Error).message).toContain("OutboxWebhooksModule's subscriptions.secretKeys");
    for (const t of apps.splice(0)) await t.close();

    const oldKey = key('k1');
    const newKey = key('k2');
    const secret = generateWebhookSecret();
    const first = await app({ ...LOOPBACK_ONLY, secretKeys: [oldKey] });
    const added = await first.app
      .get(OutboxWebhookSubscriptions)
      .add(B, { name: 'signed', url: `${receiver.baseUrl}/s`, events: ['*'], secret });
    expect(added.hasSecret).toBe(true);
    const dump = JSON.stringify(
      await db.sql('select *, encode(secret_sealed, $1) as sealed_b64 from outbox_webhook_subscriptions', [
        'base64',
      ]),
    );
    expect(dump).not.toContain(secret.slice('whsec_'.length, 20));
    expect(await db.sql('select secret, secret_key_id from outbox_webhook_subscriptions')).toEqual([
      { secret: null, secret_key_id: 'k1' },
    ]);
    await enqueue(first, B);
    await first.relay.drain();
    for (const t of apps.splice(0)) await t.close();

    // Rotation: the new key first, the old one still listed; delivery works before and after resealing.
    const rotated = await app({ ...LOOPBACK_ONLY, secretKeys: [newKey, oldKey] });
    await enqueue(rotated, B);
    await rotated.relay.drain();
    expect(await rotated.app.get(OutboxWebhookSubscriptions).resealSecrets(B)).toBe(1);
    expect(await rotated.app.get(OutboxWebhookSubscriptions).resealSecrets(B)).toBe(0);
    for (const t of apps.splice(0)) await t.close();
    const retired = await app({ ...LOOPBACK_ONLY, secretKeys: [newKey] });
    await enqueue(retired, B);
    await retired.relay.drain();

    expect(receiver.to('/s')).toHaveLength(3);
    for (const request of receiver.to('/s'))
      expect(verifyWebhook({ secret, headers: request.headers, body: request.body })).toMatchObject({
        tenantId: B,
      });

    // A sealed secret copied onto another row does not open: its deliveries are held back, not sent unsigned.
    await db.sql(
      `insert into outbox_webhook_subscriptions (id, tenant_id, name, url, events, secret_key_id, secret_sealed)
       select gen_random_uuid(), tenant_id, 'copied', url, events, secret_key_id, secret_sealed from outbox_webhook_subscriptions`,
    );
    const id = await enqueue(retired, B);
    await retired.relay.drain();
    expect(receiver.to('/s')).toHaveLength(4);
    expect(
      await db.sql(
        `select status, error_code from outbox_deliveries where event_id = $1 and consumer_name = 'subscription:copied'`,
        [id],
      ),
    ).toEqual([{ status: 'pending', error_code: 'subscriptionInvalid' }]);
  });
});
