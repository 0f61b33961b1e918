/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/relay-concurrency.ts`
 *
 * What batches side by side buy (ADR 0802): `drain()` of EVENTS (default 6,000) pending events of one tenant,
 * two consumers — both no-op, or one writing a row through `context.manager` — with `relay.concurrency` 1, 2
 * and 3, in turns, TURNS (default 3) times: events per second.
 */
import 'reflect-metadata';
import { createBenchApp } from '../harness/bench-app';
import { consumerClass, type ConsumerVariant } from '../harness/bench-consumers';
import { now } from '../harness/stats';
import { compare, heading, inTurns, openDecisionDatabase } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 6_000);
const TURNS = Number(process.env.TURNS ?? 3);
const LANES = { 'concurrency 1': 1, 'concurrency 2': 2, 'concurrency 3': 3 } as const;

type Variant = keyof typeof LANES;

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `drain() of ${EVENTS.toLocaleString('en-US')} events × 2 consumers per variant, ${TURNS} turns`,
      serverVersion,
    );
    for (const consumers of ['no-db', 'db-write'] as ConsumerVariant[]) {
      const figures = await inTurns<Variant, 'events/s'>(
        Object.keys(LANES) as Variant[],
        TURNS,
        async (variant) => {
          await db.resetWithPendingEvents(EVENTS);
          const app = await createBenchApp({
            url: db.url,
            consumers: [consumerClass(consumers)],
            relay: { enabled: false, concurrency: LANES[variant] },
            applicationName: 'decision-relay-concurrency',
            probe: false,
          });
          try {
            const began = now();
            const drained = await app.relay.drain();
            const ms = now() - began;
            if (drained.eventsClaimed !== EVENTS)
              throw new Error(`${variant}: drained ${drained.eventsClaimed} of ${EVENTS} events`);
            return { 'events/s': (EVENTS * 1000) / ms };
          } finally {
            await app.close();
          }
        },
      );
      const consumersLabel =
        consumers === 'no-db' ? 'two no-op consumers' : 'one of two consumers writes a row';
      for (const [figure, runs] of figures) compare(consumersLabel, figure, runs);
    }
  } finally {
    await close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
