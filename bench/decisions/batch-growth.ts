/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/batch-growth.ts`
 *
 * What claims that grow for quick batches buy (ADR 0803): `drain()` of EVENTS (default 6,000) pending events of
 * one tenant, two consumers — both no-op, or one writing a row through `context.manager` — with the relay policy's
 * `claimGrowth` off (claims stay at `relay.batchSize`) and as shipped (growing to `relay.maxBatchSize`, 500), in
 * turns, TURNS (default 3) times: events per second, CPU per event.
 */
import 'reflect-metadata';
import { compareDrains, exitWhenDone } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 6_000);
const TURNS = Number(process.env.TURNS ?? 3);

exitWhenDone(
  compareDrains(
    'batch-growth',
    {
      'claims stay at 100 (claimGrowth off)': { policy: { claimGrowth: null } },
      'claims grow to 500 (as shipped)': {},
    },
    { events: EVENTS, turns: TURNS },
  ),
);
