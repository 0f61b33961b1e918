/**
 * A relay process for test/relay/fairness-relays.e2e-spec.ts: `node -r @swc-node/register
 * test/support/fair-relay-child.ts`. Env: DATABASE_URL, BUSY (the backlogged tenant's id), FAIR_SHARES (`off`: the
 * relay's fair shares switched off), TENANT_WEIGHTS (JSON, `relay.tenantWeights`). Two lanes, claims of 50 growing to 200 while a tenant has the relay to itself.
 * Its consumer notes when this process handled each of the busy tenant's events; for any other tenant's event it
 * writes to `fair_probe` when this process handled the busy tenant's events of the last 2 s (epoch ms).
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Pool } from 'pg';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { buildApp } from './build-app';
import { PolicySwitches } from './policy-switches';

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
const busy = process.env.BUSY!;

@Injectable()
class FairProbe {
  /** When this process handled each of the busy tenant's events (epoch ms), in order. */
  private readonly busyAt: number[] = [];

  @OnOutboxEvent('test.tick.v1', { consumer: 'fair-probe' })
  async handle(event: OutboxEvent): Promise<void> {
    if (event.tenantId === busy) {
      this.busyAt.push(Date.now());
      return;
    }
    // the busy tenant's events this process handled in the last 2 s: the spec counts those after the commit
    const since = Date.now() - 2000;
    const recent: number[] = [];
    for (let i = this.busyAt.length - 1; i >= 0 && this.busyAt[i]! >= since; i--)
      recent.push(this.busyAt[i]!);
    await pool.query(
      `insert into fair_probe (event_id, relay, busy_at) values ($1, $2, $3) on conflict do nothing`,
      [event.eventId, process.pid, recent],
    );
  }
}

async function main(): Promise<void> {
  await buildApp({
    url: process.env.DATABASE_URL!,
    providers: [FairProbe],
    imports: process.env.FAIR_SHARES === 'off' ? [PolicySwitches.of({ fairShares: false })] : [],
    outbox: {
      relay: {
        enabled: true,
        pollIntervalMs: 50,
        batchSize: 50,
        maxBatchSize: 200,
        concurrency: 2,
        ...(process.env.TENANT_WEIGHTS
          ? { tenantWeights: JSON.parse(process.env.TENANT_WEIGHTS) as Record<string, number> }
          : {}),
      },
    },
  });
  process.stdout.write('READY\n');
}

void main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
