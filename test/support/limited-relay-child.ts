/**
 * A relay process with limited consumers, for test/operating/consumer-limits.e2e-spec.ts:
 * `node -r @swc-node/register test/support/limited-relay-child.ts`. Env: DATABASE_URL, HOLD_MS (how long each
 * handler runs), BATCH_SIZE (each claim's size, default 5), NO_CAP (set: 'capped' declares no limit, as a relay of
 * an older version would), HEARTBEAT_MS (registry.heartbeatMs), CLOCK_SKEW_MS (this process's clock runs that far
 * ahead, as a host's whose clock is off). Three batches at once.
 * Each handler writes its start and end, when its claim committed (and this process's id) to `limit_probe` on a
 * connection of its own
 * (committed at once, so the
 * spec sees what is in flight across processes), and its effect through `context.manager` (committed with the
 * delivery, so a relay killed mid-batch leaves none).
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Pool } from 'pg';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp } from './build-app';
import { recordEffect } from './outbox-fixture';

if (process.env.CLOCK_SKEW_MS) {
  const skew = Number(process.env.CLOCK_SKEW_MS);
  const now = Date.now.bind(Date);
  Date.now = () => now() + skew;
}

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 12 });
const relay = process.pid;
const holdMs = Number(process.env.HOLD_MS ?? 30);
const LEASE_MS = 2000;

async function probed(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
  const seq = (event.data as { seq?: number }).seq ?? null;
  // when its claim committed, by the database's clock: its lease's end less relay.leaseMs (never extended here)
  const [row] = (
    await pool.query<{ id: string }>(
      `insert into limit_probe (consumer, event_id, seq, relay, claimed_at)
       select $1, $2, $3, $4, d.lease_expires_at - $5 * interval '1 millisecond'
         from outbox_deliveries d
        where d.event_id = $2 and d.consumer_name = $1
       returning id`,
      [context.consumer, event.eventId, seq, relay, LEASE_MS],
    )
  ).rows;
  await new Promise((resolve) => setTimeout(resolve, holdMs));
  await pool.query('update limit_probe set ended_at = clock_timestamp() where id = $1', [row!.id]);
  await recordEffect(event, context);
}

@Injectable()
class LimitedConsumers {
  @OnOutboxEvent('test.lim.capped.v1', {
    consumer: 'capped',
    ...(process.env.NO_CAP ? {} : { concurrency: { global: 4 } }),
  })
  capped(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return probed(event, context);
  }

  @OnOutboxEvent('test.lim.rated.v1', { consumer: 'rated', rateLimit: { limit: 20, intervalMs: 500 } })
  rated(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return probed(event, context);
  }

  @OnOutboxEvent('test.lim.ordered.v1', {
    consumer: 'ordered-rated',
    ordered: true,
    rateLimit: { limit: 10, intervalMs: 300 },
  })
  orderedRated(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return probed(event, context);
  }

  @OnOutboxEvent('test.lim.keyed.v1', {
    consumer: 'keyed',
    rateLimit: { limit: 10, intervalMs: 500, perKey: { payload: 'partner' } },
  })
  keyed(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return probed(event, context);
  }

  @OnOutboxEvent('test.lim.keyed-ordered.v1', {
    consumer: 'keyed-ordered',
    ordered: true,
    rateLimit: { limit: 2, intervalMs: 400, perKey: 'aggregate' },
  })
  keyedOrdered(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return probed(event, context);
  }
}

async function main(): Promise<void> {
  await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [LimitedConsumers],
    outbox: {
      handlerTimeoutMs: 1000,
      ...(process.env.HEARTBEAT_MS ? { registry: { heartbeatMs: Number(process.env.HEARTBEAT_MS) } } : {}),
      relay: {
        enabled: true,
        pollIntervalMs: 20,
        leaseMs: LEASE_MS,
        concurrency: 3,
        batchSize: Number(process.env.BATCH_SIZE ?? 5),
        maxBatchSize: Number(process.env.BATCH_SIZE ?? 5),
      },
    },
  });
  process.stdout.write('READY\n');
}

main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
