/**
 * A relay process for the fault suite: `node -r @swc-node/register test/faults/support/fault-relay-child.ts`.
 * Env: DATABASE_URL, LEASE_MS, TIMEOUT_MS, BATCH_SIZE (default 100; small batches keep a scenario's drain long
 * enough for its faults to land, so when it is given claims do not grow past it), FLAKY ("1": the consumers sometimes throw, hang past their timeout,
 * or take 10× longer, as OUTBOX_FAULT_SEED decides).
 * Both consumers of `fault.load.v1` write their effect through `context.manager`.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from '../../support/build-app';
import { flakyPause, recordFaultEffect } from './fault-consumers';
import { faultRandomFromEnv } from './fault-random';

/** The spec's choices of which calls misbehave, or null when the consumers behave. */
const flaky = process.env.FLAKY === '1' ? faultRandomFromEnv() : null;

@Injectable()
class FaultConsumers {
  @OnOutboxEvent('fault.load.v1', {
    consumer: 'fx-writer',
    maxAttempts: 50,
    backoff: { baseMs: 20, capMs: 500, jitter: 0.5 },
  })
  async writer(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await flakyPause(event, context, flaky);
    await recordFaultEffect(event, context);
  }

  @OnOutboxEvent('fault.load.v1', {
    consumer: 'fx-audit',
    maxAttempts: 50,
    backoff: { baseMs: 20, capMs: 500, jitter: 0.5 },
  })
  async audit(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordFaultEffect(event, context);
    await flakyPause(event, context, flaky);
  }
}

async function main(): Promise<void> {
  const leaseMs = Number(process.env.LEASE_MS ?? 2000);
  const batchSize = Number(process.env.BATCH_SIZE ?? 100);
  await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [FaultConsumers],
    outbox: {
      handlerTimeoutMs: Number(process.env.TIMEOUT_MS ?? leaseMs / 2),
      relay: {
        enabled: true,
        pollIntervalMs: 100,
        leaseMs,
        batchSize,
        ...(process.env.BATCH_SIZE === undefined ? {} : { maxBatchSize: batchSize }),
      },
    },
  });
  process.stdout.write('READY\n');
}

main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
