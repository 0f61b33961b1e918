/**
 * A relay that forwards to brokers, in a process of its own (crash and fault tests):
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register test/support/broker-relay-child.ts`.
 * Env: DATABASE_URL; BROKERS, OutboxBrokersModule's `brokers` option as JSON (no functions: routing keys and subjects are the
 * event names, or SUBJECT_PREFIX + the event name for NATS); POLL_MS (default 20); LEASE_MS (default 30000);
 * MAX_ATTEMPTS (default 50). Backoff is short (10 ms doubling to 200 ms). Prints READY once it polls; SIGTERM
 * closes the app (the relay drains) and exits 0.
 */
import 'reflect-metadata';
import type { OutboxBrokerOptions } from 'nestjs-pg-outbox/brokers';
import { buildApp } from './build-app';

async function main(): Promise<void> {
  const prefix = process.env.SUBJECT_PREFIX;
  const brokers = (JSON.parse(process.env.BROKERS ?? '[]') as OutboxBrokerOptions[]).map((broker) =>
    broker.type === 'nats' && prefix
      ? { ...broker, subject: (e: { eventName: string }) => `${prefix}${e.eventName}` }
      : broker,
  );
  const t = await buildApp({
    url: process.env.DATABASE_URL!,
    outbox: {
      handlerTimeoutMs: 10_000,
      maxAttempts: Number(process.env.MAX_ATTEMPTS ?? 50),
      backoff: { baseMs: 10, capMs: 200, jitter: 0 },
      relay: {
        enabled: true,
        pollIntervalMs: Number(process.env.POLL_MS ?? 20),
        leaseMs: Number(process.env.LEASE_MS ?? 30_000),
      },
    },
    brokers: { brokers },
  });
  process.stdout.write('READY\n');
  process.on('SIGTERM', () => void t.close().then(() => process.exit(0)));
}

void main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
