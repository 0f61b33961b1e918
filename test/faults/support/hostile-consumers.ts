import type { OutboxEvent, OutboxHandlerContext } from 'nestjs-pg-outbox';
import type { FaultRandom } from './fault-random';

/** The hostile-handlers scenario's tables: effects (no unique key: a duplicate is a second row) and a deferred foreign key. */
export const HOSTILE_SCENARIO_SQL = [
  `create table hostile_effects (
     id bigint generated always as identity primary key,
     event_id uuid not null,
     consumer text not null,
     at timestamptz not null default clock_timestamp()
   )`,
  'create table hostile_parent (id uuid primary key)',
  'create table hostile_child (parent_id uuid not null references hostile_parent (id) deferrable initially deferred)',
];

/** Writes one effect row in the delivery's transaction. */
export async function recordHostileEffect(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
  await context.manager.query('insert into hostile_effects (event_id, consumer) values ($1, $2)', [
    event.eventId,
    context.consumer,
  ]);
}

/** What the hostile consumer does, by a roll of the seed, the event's number and the attempt (see `hostileAct`). */
export const HOSTILE_ACTS = [
  'unprintable',
  'deferred-violation',
  'commit',
  'rollback',
  'session-settings',
  'tenant-change',
  'sleep-past-timeout',
] as const;

function unprintable(roll: number): unknown {
  if (roll % 3 === 0) return Object.create(null);
  if (roll % 3 === 1)
    return {
      toString(): string {
        throw new Error('no');
      },
    };
  const error = new Error('hidden');
  Object.defineProperty(error, 'message', {
    get(): string {
      throw new Error('no message');
    },
  });
  return error;
}

/**
 * Prints `SLEPT <ms>` when a sleeping query ends, however it ends (cancelled at the handler's timeout, or not), for
 * the scenario to count the sleeps that held their connection: the handler itself is abandoned at its timeout.
 */
function sleepReported(sleep: Promise<unknown>): Promise<unknown> {
  const started = Date.now();
  const report = (): void => void process.stdout.write(`SLEPT ${Date.now() - started}\n`);
  sleep.then(report, report);
  return sleep;
}

/**
 * About one call in four misbehaves, each act about as often as the others (sleeping past its timeout rarer:
 * 1 in 60, half of those after taking the bound off). Decided by the seed, the event's number in the load
 * (`payload.n`) and the attempt, so that a seed replays the same acts whichever relay runs them. Returns false
 * when it behaved (the caller then writes its effect).
 */
export async function hostileAct(
  event: OutboxEvent,
  context: OutboxHandlerContext,
  random: FaultRandom,
): Promise<boolean> {
  const n = (event.data as { n?: unknown } | null)?.n;
  const roll = random.intFor(`${typeof n === 'number' ? n : event.eventId}:${context.attempt}`, 60);
  const m = context.manager;
  switch (roll) {
    case 0:
    case 1:
    case 2:
      throw unprintable(roll);
    case 3:
    case 4:
    case 5:
      await m.query('insert into hostile_child (parent_id) values (gen_random_uuid())');
      return true;
    case 6:
    case 7:
      await m.query('commit');
      return true;
    case 8:
    case 9:
      await m.query('rollback');
      return true;
    case 10:
      await m.query('set default_transaction_read_only = on');
      return true;
    case 11:
      await m.query('set search_path = pg_catalog');
      return true;
    case 12:
      await m.query(`select set_config('app.current_tenant_id', $1, false)`, [event.tenantId]);
      return true;
    case 13:
    case 14:
      await m.query(`select set_config('app.current_tenant_id', gen_random_uuid()::text, true)`);
      return true;
    case 15:
      // every other time with its bound taken off in the same text: the relay must stop it at its timeout all the same
      await sleepReported(
        m.query(
          typeof n === 'number' && n % 2 === 1
            ? 'set local statement_timeout = 0; select pg_sleep(10)'
            : 'select pg_sleep(10)',
        ),
      );
      return true;
    default:
      return false;
  }
}
