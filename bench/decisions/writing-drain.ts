/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/writing-drain.ts`
 * (or, built, `node dist/bench/decisions/writing-drain.js`; add `--cpu-prof` to see where Node's time goes)
 *
 * What a handler's write through `context.manager` costs the relay's process (ADR 1202): `drain()` of EVENTS
 * (default 10,000) pending events of one tenant, two no-op consumers, then two consumers that each write a row,
 * TURNS (default 3) times: events per second, Node and PostgreSQL CPU per event. Node µs per handler write is
 * the writing drain's Node CPU per event less the no-op drain's, halved (two writes per event).
 */
import 'reflect-metadata';
import { compareDrains, exitWhenDone } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 10_000);
const TURNS = Number(process.env.TURNS ?? 3);

exitWhenDone(
  compareDrains(
    'writing-drain',
    { 'as shipped': {} },
    { events: EVENTS, turns: TURNS, kinds: ['no-db', 'db-write-all'] },
  ),
);
