/**
 * A relay in a process of its own, for crash tests: `node -r @swc-node/register test/support/relay-child.ts`.
 * Env: DATABASE_URL; LEASE_MS; MAX_ATTEMPTS. The consumer `victim` of `test.crash.v1` writes its effect, then
 * acts on the payload's `mode`:
 * - `hang`: prints `HANDLER_STARTED <eventId>` and never returns (to be killed mid-handler);
 * - `pause`: prints `HANDLER_STARTED <eventId>` and waits to be stopped (SIGSTOP) and continued (SIGCONT): it
 *   returns once continued, and prints `HANDLER_RETURNED <eventId>`;
 * - `poison`: kills its own process with SIGKILL, as a handler that crashes the process would.
 * Relay errors are printed as `RELAY_ERROR <message>`.
 */
import 'reflect-metadata';
import { Injectable, type LoggerService } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from './build-app';
import { closeOnSigterm, runChildMain } from './child-main';
import { recordEffect } from './outbox-fixture';

@Injectable()
class VictimConsumer {
  @OnOutboxEvent('test.crash.v1', { consumer: 'victim', maxAttempts: Number(process.env.MAX_ATTEMPTS ?? 5) })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    const data = event.data as { mode?: string };
    if (data.mode === 'hang') {
      process.stdout.write(`HANDLER_STARTED ${event.eventId}\n`);
      await new Promise(() => undefined);
    } else if (data.mode === 'pause') {
      // a latch, not a timer: the handler is still running whenever the test gets to stop the process
      const continued = new Promise((resolve) => process.once('SIGCONT', resolve));
      process.stdout.write(`HANDLER_STARTED ${event.eventId}\n`);
      await continued;
      process.stdout.write(`HANDLER_RETURNED ${event.eventId}\n`);
    } else if (data.mode === 'poison') {
      process.kill(process.pid, 'SIGKILL');
    }
  }
}

const printErrors: LoggerService = {
  log: () => undefined,
  warn: () => undefined,
  debug: () => undefined,
  verbose: () => undefined,
  error: (message: unknown) =>
    void process.stdout.write(`RELAY_ERROR ${String(message).replace(/\n/g, ' ')}\n`),
};

async function main(): Promise<void> {
  const leaseMs = Number(process.env.LEASE_MS ?? 2000);
  const t = await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [VictimConsumer],
    logger: printErrors,
    outbox: { handlerTimeoutMs: leaseMs - 1, relay: { enabled: true, pollIntervalMs: 50, leaseMs } },
  });
  process.stdout.write('READY\n');
  closeOnSigterm(() => t.close());
}

runChildMain(main);
