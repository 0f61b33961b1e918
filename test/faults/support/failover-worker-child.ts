/**
 * The failover scenario's worker process: `node -r @swc-node/register test/faults/support/failover-worker-child.ts`.
 * Env: DATABASE_URL, DATABASE_HOSTS (see failover-env.ts). Relays `failover.order.v1` to one consumer that writes
 * its effect through `context.manager` and prints `HANDLED <key> <ms>`; the library's warnings and errors are
 * printed as `LOG <level> <message>`. Its pool has pg's defaults (no keepalive, no client-side timeout): what
 * bounds the relay's waits must be the library itself.
 */
import 'reflect-metadata';
import { Injectable, type LoggerService } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from '../../support/build-app';
import { runChildMain } from '../../support/child-main';
import { recordFaultEffect } from './fault-consumers';
import { FAILOVER_EVENT, failoverPoolSettings, report } from './failover-env';

@Injectable()
class FailoverConsumer {
  @OnOutboxEvent(FAILOVER_EVENT, {
    consumer: 'fx-writer',
    maxAttempts: 100,
    backoff: { baseMs: 50, capMs: 500, jitter: 0.5 },
  })
  async write(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordFaultEffect(event, context);
    report(`HANDLED ${(event.data as { key: string }).key} ${Date.now()}`);
  }
}

const printWarnings: LoggerService = {
  log: () => undefined,
  debug: () => undefined,
  verbose: () => undefined,
  warn: (message: unknown) => report(`LOG warn ${String(message).replace(/\s+/g, ' ')}`),
  error: (message: unknown) => report(`LOG error ${String(message).replace(/\s+/g, ' ')}`),
};

async function main(): Promise<void> {
  await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [FailoverConsumer],
    logger: printWarnings,
    extra: failoverPoolSettings(),
    // A poll interval well above the 250 ms bound on commit → handler: that bound holds only through wake-ups.
    outbox: {
      handlerTimeoutMs: 1000,
      relay: { enabled: true, pollIntervalMs: 1000, leaseMs: 3000 },
    },
  });
  report('READY');
}

runChildMain(main);
