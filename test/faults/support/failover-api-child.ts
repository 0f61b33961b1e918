/**
 * The failover scenario's API process: `node -r @swc-node/register test/faults/support/failover-api-child.ts`.
 * Env: DATABASE_URL, DATABASE_HOSTS (see failover-env.ts), RATE (business transactions a second, default 100).
 * Starts one transaction every 1/RATE s, each a row of `failover_orders` and its event, and prints
 * `BEGIN <key> <ms>`, then `COMMIT <key> <ms>` or `ERROR <key> <ms> <message>` when its caller is answered.
 * SIGUSR2 stops starting new ones. Its pool has the settings docs/operating.md gives a production app, scaled
 * down so that the scenario stays short.
 */
import 'reflect-metadata';
import { buildApp } from '../../support/build-app';
import { runChildMain } from '../../support/child-main';
import { FAILOVER_EVENT, FAILOVER_TENANT, failoverPoolSettings, report } from './failover-env';

/**
 * The pool settings docs/operating.md gives a production app, a fifth of them (so that the scenario stays short):
 * connect 1 s, statement 2 s, client-side read 3 s, a connection's life 6 s.
 */
const API_POOL_SETTINGS = {
  keepAlive: true,
  keepAliveInitialDelayMillis: 2_000,
  connectionTimeoutMillis: 1_000,
  statement_timeout: 2_000,
  query_timeout: 3_000,
  idle_in_transaction_session_timeout: 6_000,
  maxLifetimeSeconds: 6,
};

async function main(): Promise<void> {
  const app = await buildApp({
    url: process.env.DATABASE_URL!,
    extra: { ...API_POOL_SETTINGS, ...failoverPoolSettings() },
    outbox: { relay: { enabled: false } },
  });
  const call = async (key: string): Promise<void> => {
    report(`BEGIN ${key} ${Date.now()}`);
    try {
      await app.dataSource.transaction(async (manager) => {
        await manager.query('insert into failover_orders (key) values ($1)', [key]);
        await app.outbox.enqueue(manager, {
          tenantId: FAILOVER_TENANT,
          eventName: FAILOVER_EVENT,
          payload: { key },
        });
      });
      report(`COMMIT ${key} ${Date.now()}`);
    } catch (error) {
      report(`ERROR ${key} ${Date.now()} ${String((error as Error).message).replace(/\s+/g, ' ')}`);
    }
  };
  let n = 0;
  const timer = setInterval(() => void call(`order-${n++}`), 1000 / Number(process.env.RATE ?? 100));
  process.on('SIGUSR2', () => {
    clearInterval(timer);
    report('STOPPED');
  });
  report('READY');
}

runChildMain(main);
