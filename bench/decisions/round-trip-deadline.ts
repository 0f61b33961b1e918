/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/round-trip-deadline.ts`
 *
 * What the client-side deadline of each round trip costs (ADR 0808): `drain()` of EVENTS (default 6,000) pending
 * events of one tenant, two consumers — both no-op, or one writing a row through `context.manager` — with
 * `relay.roundTripTimeoutMs` 0 (no deadline) and its default (a timer per round trip), in turns, TURNS (default 3)
 * times: the Node process's CPU time (user + system) per event, and events per second. Then the deadline alone:
 * CALLS (default 200,000) round trips that answer at once, through `RoundTripDeadline.within` and without it, in
 * turns: CPU time per round trip, the figure that decides (a drain's own spread on a shared machine is wider than
 * what a timer per round trip can cost per event).
 */
import 'reflect-metadata';
import { createBenchApp } from '../harness/bench-app';
import { consumerClass, type ConsumerVariant } from '../harness/bench-consumers';
import { now } from '../harness/stats';
import type { QueryRunner } from 'typeorm';
import { RoundTripDeadline } from '../../libs/outbox/src/store/round-trip-deadline';
import { compare, exitWhenDone, heading, inTurns, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 6_000);
const TURNS = Number(process.env.TURNS ?? 3);
const CALLS = Number(process.env.CALLS ?? 200_000);

const VARIANTS = {
  'no deadline (0)': { roundTripTimeoutMs: 0 },
  'a deadline per round trip': {},
} as const;
type Variant = keyof typeof VARIANTS;

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `drain() of ${EVENTS.toLocaleString('en-US')} events × 2 consumers per variant, ${TURNS} turns`,
      serverVersion,
    );
    for (const consumers of ['no-db', 'db-write'] as ConsumerVariant[]) {
      const figures = await inTurns<Variant, 'µs CPU/event' | 'events/s'>(
        Object.keys(VARIANTS) as Variant[],
        TURNS,
        async (variant) => {
          await db.resetWithPendingEvents(EVENTS);
          const app = await createBenchApp({
            url: db.url,
            consumers: [consumerClass(consumers)],
            relay: { enabled: false, ...VARIANTS[variant] },
            applicationName: 'decision-round-trip-deadline',
            probe: false,
          });
          try {
            const cpu = process.cpuUsage();
            const began = now();
            const drained = await app.relay.drain();
            const ms = now() - began;
            const used = process.cpuUsage(cpu);
            if (drained.eventsClaimed !== EVENTS)
              throw new Error(`${variant}: drained ${drained.eventsClaimed} of ${EVENTS} events`);
            return {
              'µs CPU/event': (used.user + used.system) / EVENTS,
              'events/s': (EVENTS * 1000) / ms,
            };
          } finally {
            await app.close();
          }
        },
      );
      const label = consumers === 'no-db' ? 'two no-op consumers' : 'one of two consumers writes a row';
      for (const [figure, runs] of figures) compare(`${label}: ${figure}`, figure, runs);
    }
  } finally {
    await close();
  }
}

/** CPU time per round trip that answers at once, with the deadline (its default, 61 s) and without. */
async function deadlineAlone(): Promise<void> {
  const runner = { databaseConnection: {}, connection: { driver: {} } } as unknown as QueryRunner;
  const answered = async (): Promise<number> => 1;
  const deadline = new RoundTripDeadline(61_000);
  const calls = {
    'awaited as it is': () => answered(),
    'through RoundTripDeadline.within': () => deadline.within(runner, 'claim', null, answered),
  };
  print(`  ${CALLS.toLocaleString('en-US')} round trips that answer at once, per variant, ${TURNS} turns`);
  const figures = await inTurns(Object.keys(calls) as (keyof typeof calls)[], TURNS, async (variant) => {
    const cpu = process.cpuUsage();
    for (let i = 0; i < CALLS; i++) await calls[variant]();
    const used = process.cpuUsage(cpu);
    return { 'µs CPU/round trip': (used.user + used.system) / CALLS };
  });
  for (const [figure, runs] of figures) compare('the deadline alone', figure, runs);
}

exitWhenDone(main().then(deadlineAlone));
