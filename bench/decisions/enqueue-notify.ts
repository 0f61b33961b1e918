/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-notify.ts`
 *
 * What waking the relays of other processes costs an instance that only enqueues (ADR 0606), on the
 * peers scenario's enqueue work: business transactions through a Nest app — TypeORM's `transaction()`, a
 * contact, `enqueue` — at 1 and 8 connections, one listener on the wake-up channel (as a relay elsewhere). The
 * variants, all open at once and taking turns in slices of SLICE_MS (default 250 ms), SLICES each (default 24),
 * shown as the means of 4 groups of consecutive slices:
 * - as shipped: a NOTIFY on a pooled connection after the commit, paced (`NotifyPacer`, the relay policy's
 *   `wakeUpGapMs`, 2 ms);
 * - the pacer's switch flipped, the policy's `wakeUpGapMs: 0`: one pooled NOTIFY per commit;
 * - `relay.wakeUps: 'off'`: no wake-up at all.
 * Commits/s, server and Node CPU per commit, statements per commit (pg_stat_statements, NOTIFYs included) and
 * wake-ups sent per commit.
 */
import 'reflect-metadata';
import { Client } from 'pg';
import type { OutboxRelayOptions } from 'nestjs-pg-outbox';
import { readBackendCpu, cpuSpentMs } from '../harness/backend-cpu';
import { drive, libraryTransactor, type Transactor } from '../harness/enqueue-transactors';
import { StatementStats } from '../harness/statement-stats';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { compare, heading, inGroups, inTurns, openDecisionDatabase } from './decision-server';

const SLICE_MS = Number(process.env.SLICE_MS ?? 250);
const SLICES = Number(process.env.SLICES ?? 24);

interface VariantSetup {
  relay?: OutboxRelayOptions;
  policy?: Partial<RelayPolicy>;
}
/** Each variant's relay options and switches over its relay's policy (the pacer's gap is not an option). */
const VARIANTS = {
  'paced (as shipped)': {},
  'one per commit (wakeUpGapMs 0)': { policy: { wakeUpGapMs: 0 } },
  "no wake-up (wakeUps 'off')": { relay: { wakeUps: 'off' } },
} as const satisfies Record<string, VariantSetup>;
type Variant = keyof typeof VARIANTS;
const NAMES = Object.keys(VARIANTS) as Variant[];

function applicationName(variant: Variant): string {
  return `decision-notify-${NAMES.indexOf(variant)}`;
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track': 'none',
  });
  const stats = await StatementStats.enable(db);
  const listener = new Client({ connectionString: db.url });
  await listener.connect();
  // someone listens, as the relays of other processes do
  await listener.query(`listen ${outboxNames().wakeupChannel}`);
  let notifications = 0;
  listener.on('notification', () => notifications++);
  try {
    heading(
      `Business transaction + event through the app, ${SLICES} slices of ${SLICE_MS} ms per variant`,
      serverVersion,
    );
    for (const connections of [1, 8]) {
      const apps = new Map<Variant, Transactor>();
      for (const variant of NAMES) {
        const setup: VariantSetup = VARIANTS[variant];
        apps.set(
          variant,
          await libraryTransactor(
            db.url,
            connections,
            {
              side: 'library',
              business: true,
              withEvent: true,
              relay: { enabled: false, ...setup.relay },
              policy: setup.policy,
            },
            applicationName(variant),
            false,
          ),
        );
      }
      try {
        await db.truncate();
        for (const app of apps.values()) await drive(app, connections, 300);
        const figures = await inTurns(NAMES, SLICES, async (variant) => {
          const names = [applicationName(variant)];
          const before = await readBackendCpu(db.sql.bind(db), names);
          await stats.reset();
          const heard = notifications;
          const slice = await drive(apps.get(variant)!, connections, SLICE_MS);
          // the wake-ups of the slice's last commits: sent within a gap or two
          await new Promise((resolve) => setTimeout(resolve, 25));
          const reading = await stats.read(0);
          const serverMs = cpuSpentMs(before, await readBackendCpu(db.sql.bind(db), names)) ?? Number.NaN;
          return {
            rate: (slice.commits * 1000) / slice.ms,
            server: (serverMs * 1000) / slice.commits,
            node: slice.cpuUs / slice.commits,
            statements: (reading?.calls ?? Number.NaN) / slice.commits,
            wakeups: (notifications - heard) / slice.commits,
          };
        });
        const label = `${connections} connection${connections > 1 ? 's' : ''}`;
        compare(`${label}: commits/s`, '/s', inGroups(figures.get('rate')!));
        compare(`${label}: server CPU per commit`, 'µs', inGroups(figures.get('server')!));
        compare(`${label}: Node CPU per commit`, 'µs', inGroups(figures.get('node')!));
        compare(`${label}: statements per commit`, '', inGroups(figures.get('statements')!));
        compare(`${label}: wake-ups heard per commit`, '', inGroups(figures.get('wakeups')!));
      } finally {
        for (const app of apps.values()) await app.close();
      }
    }
  } finally {
    await listener.end();
    await stats.disable();
    await close();
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
