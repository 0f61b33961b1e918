/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/relay-concurrency.ts`
 *
 * What batches side by side buy (ADR 0802): `drain()` of EVENTS (default 6,000) pending events of one tenant,
 * two consumers — both no-op, or one writing a row through `context.manager` — with the relay policy's `lanes`
 * (`relay.concurrency`) 1, 2 and 3, in turns, TURNS (default 3) times: events per second, CPU per event.
 */
import 'reflect-metadata';
import { compareDrains, exitWhenDone } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 6_000);
const TURNS = Number(process.env.TURNS ?? 3);

exitWhenDone(
  compareDrains(
    'relay-concurrency',
    {
      'lanes 1': { policy: { lanes: 1 } },
      'lanes 2 (as shipped: auto, pool of 10)': { policy: { lanes: 2 } },
      'lanes 3': { policy: { lanes: 3 } },
    },
    { events: EVENTS, turns: TURNS },
  ),
);
