import { Webhook } from 'standardwebhooks';
import { Test } from '@nestjs/testing';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import {
  OutboxConfigurationError,
  OutboxConsumerRegistry,
  OutboxModule,
  OutboxValidationError,
} from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import {
  generateWebhookSecret,
  OutboxWebhookService,
  OutboxWebhooksModule,
  OutboxWebhookVerificationError,
  verifyWebhook,
  type OutboxWebhookOptions,
} from 'nestjs-pg-outbox/webhooks';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { refusedUrl, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait-for';
import { deliveryOf, enqueueIn, TENANT, truncateOutbox } from '../support/outbox-fixture';

const FAST = { baseMs: 1, capMs: 60_000, jitter: 0 };

describe('webhooks', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let t: TestApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, 'outbox_consumers', 'outbox_consumer_instances');
    receiver.requests.length = 0;
    receiver.reply = () => ({});
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** An app with these webhooks (each defaults to "hook": POST /hook for test.hook.*); one default webhook when none is given. */
  const start = async (...webhooks: Partial<OutboxWebhookOptions>[]): Promise<TestApp> => {
    if (webhooks.length === 0) webhooks.push({});
    t = await buildApp({
      url: db.url,
      webhooks: {
        webhooks: webhooks.map(
          (w) =>
            ({
              name: 'hook',
              url: `${receiver.baseUrl}/hook`,
              events: ['test.hook.*'],
              timeoutMs: 2000,
              backoff: FAST,
              ...w,
            }) as OutboxWebhookOptions,
        ),
      },
    });
    return t;
  };
  const enqueue = (
    app: TestApp,
    payload: Record<string, unknown> = { n: 1 },
    eventName = 'test.hook.created.v1',
  ) =>
    enqueueIn(app, {
      eventName,
      payload,
      aggregateType: 'thing',
      aggregateId: 't-1',
      correlationId: 'corr-1',
    });
  const delivery = async (eventId: string, consumer = 'webhook:hook') =>
    (await deliveryOf(db, eventId, consumer))!;
  const eventStatus = async (id: string) =>
    (await db.sql<{ status: string }>('select status from event_outbox where id = $1', [id]))[0]!.status;
  const makeRetriesDue = () =>
    db.sql(`update outbox_deliveries set next_attempt_at = now() where status in ('failed', 'pending')`);

  it('posts the declared envelope, signed, and the receiver verifies it with verifyWebhook()', async () => {
    const secret = generateWebhookSecret();
    const app = await start({ secret, headers: { authorization: 'Bearer t0ken' } });
    receiver.reply = () => ({ body: { ok: true, runId: 'run-42' } });
    const id = await enqueue(app, { name: 'Ada', nested: { list: [1, 'two', null] } });
    const round = await app.relay.drain();
    expect(round.succeeded).toBe(1);

    const [request] = receiver.requests;
    expect(request!.path).toBe('/hook');
    expect(JSON.parse(request!.body)).toEqual({
      eventId: id,
      eventName: 'test.hook.created.v1',
      tenantId: TENANT,
      occurredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      correlationId: 'corr-1',
      aggregate: { type: 'thing', id: 't-1' },
      schemaVersion: 1,
      data: { name: 'Ada', nested: { list: [1, 'two', null] } },
    });
    expect(request!.headers).toMatchObject({
      'content-type': 'application/json',
      authorization: 'Bearer t0ken',
      'webhook-id': id,
      'outbox-attempt': '1',
      'outbox-event-name': 'test.hook.created.v1',
      'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]+=*$/),
    });
    expect(Math.abs(Number(request!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);

    const envelope = verifyWebhook({ secret, headers: request!.headers, body: request!.body });
    expect(envelope.eventId).toBe(id);
    expect(() =>
      verifyWebhook({ secret: generateWebhookSecret(), headers: request!.headers, body: request!.body }),
    ).toThrow(OutboxWebhookVerificationError);
    expect(() =>
      verifyWebhook({ secret, headers: request!.headers, body: request!.body.replace('Ada', 'Eve') }),
    ).toThrow(/signature/);

    expect(await delivery(id)).toMatchObject({
      status: 'delivered',
      attempt_count: 1,
      external_run_id: 'run-42',
      error_code: null,
    });
    expect(await eventStatus(id)).toBe('published');
    const [registered] = await db.sql('select name, kind, event_patterns from outbox_consumers');
    expect(registered).toEqual({ name: 'webhook:hook', kind: 'webhook', event_patterns: ['test.hook.*'] });
  });

  it('signs as Standard Webhooks does: the standardwebhooks package verifies the relay, verifyWebhook verifies the package', async () => {
    const secret = generateWebhookSecret();
    const app = await start({ secret });
    const id = await enqueue(app, { name: 'Ada' });
    await app.relay.drain();
    const [request] = receiver.requests;
    const headers = Object.fromEntries(
      ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(request!.headers[h])]),
    );
    expect(new Webhook(secret).verify(request!.body, headers)).toMatchObject({ eventId: id });
    // The same key without the prefix is base64 too, for the package: still the relay's key.
    expect(new Webhook(secret.slice('whsec_'.length)).verify(request!.body, headers)).toMatchObject({
      eventId: id,
    });

    const body = JSON.stringify({ eventId: 'e-9', data: { a: 1 } });
    const at = new Date();
    const signed = {
      'webhook-id': 'e-9',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign('e-9', at, body),
    };
    expect(verifyWebhook({ secret, headers: signed, body })).toEqual({ eventId: 'e-9', data: { a: 1 } });
    // A secret without the whsec_ prefix would be read differently by the two sides: refused, not guessed.
    const bare = 'a-plain-secret-of-more-than-16-characters';
    expect(() => verifyWebhook({ secret: bare, headers: signed, body })).toThrow(OutboxValidationError);
    await expect(start({ secret: bare })).rejects.toThrow(/webhooks\[0\] \("hook"\)\.secret/);
  });

  it('retries a 500 and delivers once on the 200 that follows, with the same event id', async () => {
    const app = await start();
    receiver.reply = (_, index) =>
      index === 0 ? { status: 500, body: 'boom' } : { headers: { 'x-run-id': 'exec-7' }, body: '' };
    const id = await enqueue(app);
    expect(await app.relay.runOnce()).toMatchObject({ failed: 1, succeeded: 0 });
    expect(await delivery(id)).toMatchObject({
      status: 'failed',
      attempt_count: 1,
      error_code: 'httpStatus',
      last_error: 'HTTP 500 Internal Server Error: boom',
    });
    await makeRetriesDue();
    expect(await app.relay.runOnce()).toMatchObject({ succeeded: 1 });
    expect(receiver.requests.map((r) => [r.id, r.attempt])).toEqual([
      [id, 1],
      [id, 2],
    ]);
    expect(await delivery(id)).toMatchObject({
      status: 'delivered',
      attempt_count: 2,
      external_run_id: 'exec-7',
    });
    expect(await eventStatus(id)).toBe('published');
  });

  it('dead-letters a 400 at once, unless retryOn4xx', async () => {
    const app = await start(
      { name: 'strict', maxAttempts: 5 },
      { name: 'lenient', retryOn4xx: true, maxAttempts: 5 },
    );
    receiver.reply = () => ({ status: 400, body: { error: 'unknown field' } });
    const id = await enqueue(app);
    await app.relay.runOnce();
    expect(await delivery(id, 'webhook:strict')).toMatchObject({
      status: 'dead',
      attempt_count: 1,
      error_code: 'httpStatus',
    });
    expect(String((await delivery(id, 'webhook:strict')).last_error)).toMatch(
      /^HTTP 400 Bad Request: \{"error":"unknown field"\}/,
    );
    expect(await delivery(id, 'webhook:lenient')).toMatchObject({
      status: 'failed',
      attempt_count: 1,
      error_code: 'httpStatus',
    });
    expect(await eventStatus(id)).toBe('failed');
  });

  it('gives up on a slow receiver after timeoutMs and counts a timeout', async () => {
    const app = await start({ timeoutMs: 200 });
    receiver.reply = () => ({ delayMs: 3000 });
    const id = await enqueue(app);
    const started = Date.now();
    await app.relay.runOnce();
    expect(Date.now() - started).toBeLessThan(2500);
    expect(await delivery(id)).toMatchObject({
      status: 'failed',
      error_code: 'timeout',
      last_error: 'no complete response within 200 ms',
    });
    await waitFor(() => receiver.requests[0]?.outcome === 'aborted', {
      message: 'the receiver to see the request abandoned',
    });
  }, 20_000);

  it('records a refused connection as connectionError', async () => {
    const app = await start({ url: await refusedUrl() });
    const id = await enqueue(app);
    await app.relay.runOnce();
    const row = await delivery(id);
    expect(row).toMatchObject({ status: 'failed', error_code: 'connectionError' });
    expect(String(row.last_error)).toContain('ECONNREFUSED');
  });

  it('treats a 2xx with ok: false as remoteReportedFailure and keeps the receiver run id', async () => {
    const app = await start();
    receiver.reply = () => ({ body: { ok: false, event_id: 'n8n-exec-1', message: 'workflow failed' } });
    const id = await enqueue(app);
    await app.relay.runOnce();
    const row = await delivery(id);
    expect(row).toMatchObject({
      status: 'failed',
      error_code: 'remoteReportedFailure',
      external_run_id: 'n8n-exec-1',
    });
    expect(String(row.last_error)).toContain('workflow failed');
  });

  it('waits as long as Retry-After says, in seconds or as an HTTP date', async () => {
    const app = await start({ name: 'seconds' }, { name: 'date', url: `${receiver.baseUrl}/date` });
    receiver.reply = (request) =>
      request.path === '/date'
        ? { status: 429, headers: { 'retry-after': new Date(Date.now() + 20_000).toUTCString() } }
        : { status: 503, headers: { 'retry-after': '8' } };
    const id = await enqueue(app);
    await app.relay.runOnce();
    const delayOf = async (consumer: string) => {
      const [row] = await db.sql<{ delay: number }>(
        `select extract(epoch from next_attempt_at - updated_at) * 1000 as delay from outbox_deliveries where event_id = $1 and consumer_name = $2`,
        [id, consumer],
      );
      return Number(row!.delay);
    };
    expect(await delayOf('webhook:seconds')).toBeGreaterThanOrEqual(7900);
    expect(await delayOf('webhook:seconds')).toBeLessThan(9000);
    expect(await delayOf('webhook:date')).toBeGreaterThanOrEqual(18_000);
    expect(await delayOf('webhook:date')).toBeLessThan(21_000);
    expect((await app.relay.runOnce()).deliveriesClaimed).toBe(0);
  });

  it('drives an event that cannot become a wire body to a dead letter, without sending it', async () => {
    const app = await start();
    const [{ id }] = (await db.sql<{ id: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, 'test.hook.created.v1', '{"n": 1e400}') returning id`,
      [TENANT],
    )) as [{ id: string }];
    await app.relay.runOnce();
    const row = await delivery(id);
    expect(row).toMatchObject({
      status: 'dead',
      attempt_count: 1,
      error_code: 'malformedPayload',
      lease_token: null,
    });
    expect(String(row.last_error)).toContain('data.n');
    expect(await eventStatus(id)).toBe('failed');
    expect(receiver.requests).toHaveLength(0);
  });

  it('opens the circuit after repeated failures, holds deliveries without spending attempts, and closes after a good probe', async () => {
    const app = await start({ maxAttempts: 10, circuitBreaker: { failureThreshold: 3, cooldownMs: 400 } });
    const webhooks = app.app.get(OutboxWebhookService);
    receiver.reply = () => ({ status: 503 });
    for (let i = 0; i < 3; i++) await enqueue(app, { i });
    await app.relay.runOnce();
    expect(receiver.requests).toHaveLength(3);
    expect(webhooks.circuitStates()).toEqual([
      expect.objectContaining({
        consumer: 'webhook:hook',
        tenantId: null,
        url: `${receiver.baseUrl}/hook`,
        state: 'open',
        consecutiveFailures: 3,
      }),
    ]);
    // Operators see the endpoint as paused in the tenant's stats.
    expect((await app.app.get(OutboxAdminService).stats(TENANT)).webhookCircuits).toEqual([
      expect.objectContaining({ consumer: 'webhook:hook', state: 'open' }),
    ]);

    // While open: claimed, given back unsent, no attempt spent.
    await makeRetriesDue();
    await app.relay.runOnce();
    expect(receiver.requests).toHaveLength(3);
    const held = await db.sql<{ status: string; attempt_count: number; error_code: string }>(
      'select status, attempt_count, error_code from outbox_deliveries',
    );
    expect(held).toEqual(Array(3).fill({ status: 'pending', attempt_count: 1, error_code: 'circuitOpen' }));

    // After the cool-down one probe goes; it succeeds, the circuit closes and the rest follow.
    receiver.reply = () => ({});
    await waitFor(async () => (await app.relay.runOnce()).succeeded > 0, {
      timeoutMs: 5000,
      message: 'the probe to go through',
    });
    expect(receiver.requests).toHaveLength(4);
    expect(webhooks.circuitStates()[0]).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    await makeRetriesDue();
    await app.relay.drain();
    const settled = await db.sql<{ status: string; attempt_count: number }>(
      'select status, attempt_count from outbox_deliveries',
    );
    expect(settled).toEqual(Array(3).fill({ status: 'delivered', attempt_count: 2 }));
    expect(receiver.requests).toHaveLength(6);
  }, 20_000);

  it('reports every webhook wiring problem in one boot error', async () => {
    const failure = buildApp({
      url: db.url,
      outbox: { relay: { leaseMs: 5000 }, handlerTimeoutMs: 1000 },
      webhooks: {
        webhooks: [
          { name: 'a', url: 'ftp://example.com/x', events: ['crm.contact.*'], timeoutMs: 1000 },
          { name: 'b', url: 'http://example.com/x', events: ['Contact Created'], timeoutMs: 1000 },
          { name: 'c', url: 'http://example.com/x', events: ['crm.*'], timeoutMs: 5000 },
          { name: 'c', url: 'http://example.com/x', events: ['crm.*'], timeoutMs: 1000 },
          {
            name: 'd',
            url: 'http://u:p@example.com/x',
            events: ['crm.*'],
            timeoutMs: 1000,
            headers: { 'webhook-id': 'x' },
            secret: 'short',
          },
        ],
      },
    });
    const error = (await failure.catch((e: unknown) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    const text = error.problems.join('\n');
    expect(error.problems).toHaveLength(7);
    expect(text).toContain('webhooks[0] ("a").url');
    expect(text).toContain('webhooks[1] ("b").events');
    expect(text).toContain('webhooks[2] ("c").timeoutMs');
    expect(text).toContain('webhooks[2] and webhooks[3] are both named "c"');
    expect(text).toContain('webhooks[4] ("d").url');
    expect(text).toContain('webhooks[4] ("d").headers');
    expect(text).toContain('webhooks[4] ("d").secret');
  });

  it("lists a bad subscriptions option of OutboxWebhooksModule with the app's other wiring problems", async () => {
    const failure = buildApp({
      url: db.url,
      outbox: { relay: { leaseMs: 5000 } },
      webhooks: {
        webhooks: [{ name: 'a', url: 'ftp://example.com/x', events: ['crm.*'], timeoutMs: 1000 }],
        subscriptions: { timeoutMs: 5000, enabled: 'yes' as never },
      },
    });
    const error = (await failure.catch((e: unknown) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(error.problems).toEqual([
      expect.stringContaining(
        'option handlerTimeoutMs must be an integer number of ms ≥ 1 and below relay.leaseMs',
      ),
      expect.stringContaining('option OutboxWebhooksModule subscriptions.enabled must be true or false'),
      expect.stringContaining(
        'option OutboxWebhooksModule subscriptions.timeoutMs must be an integer number of ms ≥ 1 and below relay.leaseMs (5000), got 5000',
      ),
      expect.stringContaining('webhooks[0] ("a").url'),
    ]);
  });

  it.each([
    [
      'webhooks',
      { webhooks: [] },
      "OutboxWebhooksModule.forRoot({ webhooks }) of 'nestjs-pg-outbox/webhooks'",
    ],
    [
      'webhookSubscriptions',
      { webhookSubscriptions: { enabled: false } },
      "OutboxWebhooksModule.forRoot({ subscriptions }) of 'nestjs-pg-outbox/webhooks'",
    ],
  ])('refuses OutboxModule.forRoot({ %s }), naming where the option went', async (option, given, now) => {
    const failure = buildApp({ url: db.url, outbox: given as never });
    const error = (await failure.catch((e: unknown) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(error.problems).toEqual([expect.stringContaining(`option ${option} is now ${now}`)]);
  });

  it('listens to several patterns, keeping only those no other one covers', async () => {
    const app = await start({ events: ['test.hook.*', 'test.other.thing.v1', 'test.hook.created.v1'] });
    const hooked = await enqueue(app, { n: 1 }, 'test.hook.created.v1');
    const other = await enqueue(app, { n: 2 }, 'test.other.thing.v1');
    const ignored = await enqueue(app, { n: 3 }, 'test.unrelated.v1');
    expect(await app.relay.drain()).toMatchObject({ succeeded: 2 });
    expect(receiver.requests.map((r) => JSON.parse(r.body).eventId).sort()).toEqual([hooked, other].sort());
    expect(await eventStatus(ignored)).toBe('no_handlers');
    const [registered] = await db.sql('select event_patterns from outbox_consumers');
    expect(registered).toEqual({ event_patterns: ['test.hook.*', 'test.other.thing.v1'] });
  });

  it('takes webhooks from OutboxWebhooksModule.forRootAsync and loads them into the registry as webhook:<name>', async () => {
    const module = await Test.createTestingModule({
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        OutboxModule.forRootAsync({ useFactory: async () => ({ relay: { enabled: false } }) }),
        OutboxWebhooksModule.forRootAsync({
          useFactory: async () => ({
            webhooks: [
              {
                name: 'async',
                url: `${receiver.baseUrl}/async`,
                events: ['crm.contact.created.v1', 'crm.*'],
                timeoutMs: 1000,
              },
            ],
          }),
        }),
      ],
    }).compile();
    module.useLogger(false);
    await module.init();
    try {
      const consumer = module.get(OutboxConsumerRegistry).get('webhook:async');
      expect(consumer).toMatchObject({ kind: 'webhook', eventName: 'crm.*', methodName: 'deliver' });
    } finally {
      await module.close();
    }
  });
});
