/**
 * A relay in a process of its own, for crash tests: `node -r @swc-node/register test/support/relay-child.ts`.
 * Env: DATABASE_URL; LEASE_MS; HANG_ON (an event payload key: when present, the handler writes its effect,
 * prints `HANDLER_STARTED <eventId>` and never returns, waiting to be killed).
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from '@app/outbox';
import { buildApp } from './build-app';
import { recordEffect } from './effects';

@Injectable()
class VictimConsumer {
  @OnOutboxEvent('test.crash.v1', { consumer: 'victim' })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    if ((event.data as Record<string, unknown>)[process.env.HANG_ON ?? 'hang']) {
      process.stdout.write(`HANDLER_STARTED ${event.eventId}\n`);
      await new Promise(() => undefined);
    }
  }
}

async function main(): Promise<void> {
  const leaseMs = Number(process.env.LEASE_MS ?? 2000);
  const t = await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [VictimConsumer],
    outbox: { handlerTimeoutMs: leaseMs - 1, relay: { enabled: true, pollIntervalMs: 50, leaseMs } },
  });
  process.stdout.write('READY\n');
  process.on('SIGTERM', () => void t.close().then(() => process.exit(0)));
}

void main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
