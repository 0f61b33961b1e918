/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/batch-growth.ts`
 *
 * What claims that grow for quick batches buy (ADR 0803): `drain()` of EVENTS (default 6,000) pending events of
 * one tenant, two consumers — both no-op, or one writing a row through `context.manager` — with
 * `relay.maxBatchSize` 100 (claims stay at `relay.batchSize`) and the default 500, in turns, TURNS (default 3)
 * times: events per second.
 */
import 'reflect-metadata';
import { compareDrains, exitWhenDone } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 6_000);
const TURNS = Number(process.env.TURNS ?? 3);

exitWhenDone(
  compareDrains(
    'batch-growth',
    { 'claims stay at 100': { maxBatchSize: 100 }, 'claims grow to 500': { maxBatchSize: 500 } },
    { events: EVENTS, turns: TURNS },
  ),
);
