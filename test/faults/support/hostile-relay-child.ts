/**
 * A relay process for the hostile-handlers fault scenario: `node -r @swc-node/register
 * test/faults/support/hostile-relay-child.ts`. Env: DATABASE_URL, TIMEOUT_MS (the handlers' timeout),
 * OUTBOX_FAULT_SEED (the spec's seed, which decides the hostile acts).
 * Two healthy consumers of `fault.hostile.v1` write their effect through `context.manager`; beside them,
 * `hx-hostile` misbehaves on some events (see `hostileAct`) and writes its effect on the others.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from '../../support/build-app';
import { faultRandomFromEnv } from './fault-random';
import { hostileAct, recordHostileEffect } from './hostile-consumers';

const random = faultRandomFromEnv();
const retries = { maxAttempts: 50, backoff: { baseMs: 20, capMs: 500, jitter: 0.5 } };

@Injectable()
class HostileScenarioConsumers {
  @OnOutboxEvent('fault.hostile.v1', { consumer: 'hx-audit', ...retries })
  audit(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordHostileEffect(event, context);
  }

  @OnOutboxEvent('fault.hostile.v1', {
    consumer: 'hx-hostile',
    maxAttempts: 2,
    backoff: { baseMs: 20, capMs: 100, jitter: 0 },
  })
  async hostile(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    if (!(await hostileAct(event, context, random))) await recordHostileEffect(event, context);
  }

  @OnOutboxEvent('fault.hostile.v1', { consumer: 'hx-writer', ...retries })
  writer(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordHostileEffect(event, context);
  }
}

async function main(): Promise<void> {
  await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [HostileScenarioConsumers],
    poolSize: 2,
    outbox: {
      handlerTimeoutMs: Number(process.env.TIMEOUT_MS ?? 300),
      relay: { enabled: true, pollIntervalMs: 100, leaseMs: 10_000, batchSize: 50 },
    },
  });
  process.stdout.write('READY\n');
}

main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
