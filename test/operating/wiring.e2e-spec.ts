import { Injectable, Scope } from '@nestjs/common';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxConsumerRegistry,
  type OutboxModuleOptions,
} from 'nestjs-pg-outbox';
import { buildApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

@Injectable()
class WelcomeEmailConsumer {
  @OnOutboxEvent('crm.contact.created.v1', { consumer: 'WelcomeEmail.send' })
  send(): void {}
}

@Injectable()
class LegacyMailer {
  @OnOutboxEvent('crm.contact.created.v1', { consumer: 'WelcomeEmail.send' })
  send(): void {}
}

@Injectable({ scope: Scope.REQUEST })
class AuditConsumer {
  @OnOutboxEvent('crm.contact.created.v1')
  record(): void {}
}

@Injectable()
class BadNameConsumer {
  @OnOutboxEvent('Contact Created')
  handle(): void {}
}

@Injectable()
class GoodConsumers {
  @OnOutboxEvent('crm.contact.created.v1')
  created(): void {}

  @OnOutboxEvent('crm.contact.*', { consumer: 'contact-audit' })
  audit(): void {}

  @OnOutboxEvent('*')
  everything(): void {}
}

describe('wiring', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('rejects app.init() with one error listing every wiring mistake', async () => {
    const failure = buildApp({
      url: db.url,
      providers: [WelcomeEmailConsumer, LegacyMailer, AuditConsumer, BadNameConsumer],
    });
    await expect(failure).rejects.toBeInstanceOf(OutboxConfigurationError);
    const error = (await failure.catch((e: OutboxConfigurationError) => e)) as OutboxConfigurationError;
    expect(error.problems).toHaveLength(3);
    expect(error.message).toContain('"WelcomeEmail.send" (WelcomeEmailConsumer#send, LegacyMailer#send)');
    expect(error.message).toContain('AuditConsumer is request-scoped');
    expect(error.message).toContain('BadNameConsumer#handle');
  });

  it('lists an option moved to a feature module in 0.2.0 with the other wiring mistakes, naming its module and entry', async () => {
    const failure = buildApp({
      url: db.url,
      providers: [WelcomeEmailConsumer, LegacyMailer],
      outbox: {
        webhooks: [{ name: 'w', url: 'https://example.com/hook', events: ['*'], timeoutMs: 1000 }],
        brokers: [{ name: 'r', type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: 'x', events: ['*'] }],
      } as OutboxModuleOptions,
    });
    const error = (await failure.catch((e: unknown) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(error.problems).toHaveLength(3);
    expect(error.message).toContain(
      "option webhooks is now OutboxWebhooksModule.forRoot({ webhooks }) of 'nestjs-pg-outbox/webhooks'",
    );
    expect(error.message).toContain(
      "option brokers is now OutboxBrokersModule.forRoot({ brokers }) of 'nestjs-pg-outbox/brokers'",
    );
    expect(error.message).toContain('"WelcomeEmail.send" (WelcomeEmailConsumer#send, LegacyMailer#send)');
  });

  it('names the missing ScheduleModule and TypeOrmModule imports', async () => {
    const failure = buildApp({
      url: db.url,
      schedule: false,
      typeorm: false,
      outbox: { relay: { enabled: true } },
    });
    const error = (await failure.catch((e: OutboxConfigurationError) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(error.message).toContain('ScheduleModule.forRoot()');
    expect(error.message).toContain('TypeOrmModule.forRoot(');
  });

  it('does not need ScheduleModule when the relay is disabled', async () => {
    const app = await buildApp({
      url: db.url,
      schedule: false,
      providers: [GoodConsumers],
      outbox: { relay: { enabled: false } },
    });
    await app.close();
  });

  it('rejects invalid options with every problem listed', async () => {
    const failure = buildApp({
      url: db.url,
      outbox: { maxAttempts: 0, relay: { batchSize: -1, concurrency: 0 }, backoff: { jitter: 2 } },
    });
    const error = (await failure.catch((e: OutboxConfigurationError) => e)) as OutboxConfigurationError;
    expect(error.problems).toHaveLength(4);
    expect(error.message).toContain('relay.concurrency must be a positive integer, or "auto"');
    expect(error.message).toMatch(/maxAttempts[\s\S]*relay\.batchSize|relay\.batchSize[\s\S]*maxAttempts/);
    expect(error.message).toContain('backoff.jitter');
  });

  it('refuses at boot every duration above 2^31-1 ms, naming each option, in one error', async () => {
    const tooLong = 2 ** 31;
    @Injectable()
    class SlowRetryConsumer {
      @OnOutboxEvent('crm.contact.created.v1', { backoff: { baseMs: 1000, capMs: tooLong } })
      handle(): void {}
    }
    const failure = buildApp({
      url: db.url,
      providers: [SlowRetryConsumer],
      outbox: {
        backoff: { baseMs: tooLong, capMs: tooLong },
        relay: {
          leaseMs: tooLong,
          roundTripTimeoutMs: tooLong,
          pollIntervalMs: tooLong,
          shutdownTimeoutMs: tooLong,
          scheduledCoalesceMs: tooLong,
        },
        registry: { liveWithinMs: 25 * 24 * 3600_000, heartbeatMs: tooLong, orphanAfterMs: tooLong },
        retention: { intervalMs: tooLong },
      },
      webhooks: {
        subscriptions: { cacheTtlMs: tooLong, pausedRecheckMs: tooLong },
        webhooks: [
          {
            name: 'w',
            url: 'https://example.com/hook',
            events: ['*'],
            timeoutMs: 1000,
            backoff: { baseMs: 1000, capMs: tooLong },
            circuitBreaker: { cooldownMs: tooLong },
          },
        ],
      },
    });
    const error = (await failure.catch((e: unknown) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    const fields = [
      'backoff.baseMs',
      'backoff.capMs',
      'relay.leaseMs',
      'relay.roundTripTimeoutMs',
      'relay.pollIntervalMs',
      'relay.shutdownTimeoutMs',
      'relay.scheduledCoalesceMs',
      'registry.liveWithinMs',
      'registry.heartbeatMs',
      'registry.orphanAfterMs',
      'retention.intervalMs',
      'OutboxWebhooksModule subscriptions.cacheTtlMs',
      'OutboxWebhooksModule subscriptions.pausedRecheckMs',
      'backoff of SlowRetryConsumer#handle.capMs',
      'webhooks[0] ("w").backoff.capMs',
      'webhooks[0] ("w").circuitBreaker.cooldownMs',
    ];
    for (const field of fields)
      expect(error.problems.filter((p) => p.startsWith(`option ${field} must be`))).toHaveLength(1);
    expect(error.problems).toHaveLength(fields.length);
    expect(error.message).toContain('2147483647');
  });

  it('registers consumers under stable names, with exact, prefix and catch-all patterns', async () => {
    const t = await buildApp({ url: db.url, providers: [GoodConsumers] });
    try {
      const registry = t.app.get(OutboxConsumerRegistry);
      expect(registry.consumers().map((c) => c.name)).toEqual([
        'GoodConsumers.created',
        'contact-audit',
        'GoodConsumers.everything',
      ]);
      expect(registry.consumersFor('crm.contact.created.v1').map((c) => c.name)).toEqual([
        'GoodConsumers.created',
        'contact-audit',
        'GoodConsumers.everything',
      ]);
      expect(registry.consumersFor('crm.deal.won.v1').map((c) => c.name)).toEqual([
        'GoodConsumers.everything',
      ]);
      const created = registry.get('GoodConsumers.created')!;
      expect(created).toMatchObject({
        eventName: 'crm.contact.created.v1',
        hostClass: GoodConsumers,
        methodName: 'created',
      });
    } finally {
      await t.close();
    }
  });

  it('keeps two apps in one process apart', async () => {
    const a = await buildApp({ url: db.url, providers: [GoodConsumers] });
    const b = await buildApp({ url: db.url, providers: [WelcomeEmailConsumer] });
    try {
      expect(a.app.get(OutboxConsumerRegistry).consumers()).toHaveLength(3);
      expect(
        b.app
          .get(OutboxConsumerRegistry)
          .consumers()
          .map((c) => c.name),
      ).toEqual(['WelcomeEmail.send']);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
