/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/optimistic-batch.ts`
 *
 * What a batch without a savepoint per handler buys (ADR 1001): `drain()` of EVENTS (default 10,000) pending
 * events of one tenant, two consumers — both no-op, or one writing a row through `context.manager` — with the
 * relay policy's `optimisticBatches` on (as shipped: the batch's context and bound sent once, no savepoint) and
 * off (a savepoint and the handler context per writing handler), in turns, TURNS (default 3) times: events per
 * second, Node and PostgreSQL CPU per event.
 */
import 'reflect-metadata';
import { compareDrains, exitWhenDone } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 10_000);
const TURNS = Number(process.env.TURNS ?? 3);

exitWhenDone(
  compareDrains(
    'optimistic-batch',
    {
      'optimistic (as shipped)': {},
      'a savepoint per handler': { policy: { optimisticBatches: false } },
    },
    { events: EVENTS, turns: TURNS },
  ),
);
