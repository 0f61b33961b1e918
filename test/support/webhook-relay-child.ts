/**
 * A relay with one webhook in a process of its own, for crash tests:
 * `node -r @swc-node/register test/support/webhook-relay-child.ts`.
 * Env: DATABASE_URL; WEBHOOK_URL; LEASE_MS; TIMEOUT_MS (below LEASE_MS). Hosts `webhook:crash` for `test.crash.*`
 * and prints READY once it polls.
 */
import 'reflect-metadata';
import { buildApp } from './build-app';
import { closeOnSigterm, runChildMain } from './child-main';

async function main(): Promise<void> {
  const leaseMs = Number(process.env.LEASE_MS ?? 2000);
  const t = await buildApp({
    url: process.env.DATABASE_URL!,
    outbox: {
      handlerTimeoutMs: leaseMs - 1,
      relay: { enabled: true, pollIntervalMs: 50, leaseMs },
    },
    webhooks: {
      webhooks: [
        {
          name: 'crash',
          url: process.env.WEBHOOK_URL!,
          events: ['test.crash.*'],
          timeoutMs: Number(process.env.TIMEOUT_MS ?? leaseMs - 1),
        },
      ],
    },
  });
  process.stdout.write('READY\n');
  closeOnSigterm(() => t.close());
}

runChildMain(main);
