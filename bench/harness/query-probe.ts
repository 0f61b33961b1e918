/**
 * Counts and times every round trip a TypeORM DataSource's pool makes, by kind, at the driver (see
 * `RoundTripProbe`: the relay writes its statements on the pg connection itself, in pipeline mode). Used for the
 * deterministic figures "round trips per batch" and "statements per batch", and for the time split of a relay
 * round.
 */
import type { DataSource } from 'typeorm';
import { RoundTripProbe, type ProbedStatement } from '../../tools/round-trip-probe';

/** Round trips of one kind: how many, and milliseconds from send to result. */
export interface QueryKindStats {
  /** Round trips. */
  count: number;
  ms: number;
  /** Statements those round trips carried. */
  statements?: number;
}

/** Names a statement by what it does, so a time split reads as the relay's steps. Unknown ones keep their start. */
const KINDS: readonly [RegExp, string][] = [
  // a round trip is named by its main statement (its statements joined with ";\n", in the order written)
  [/with fresh as.*with retry as/is, 'claim (fan out + due) + begin/commit'],
  [/with fresh as/i, 'claim + fan out new events + begin/commit'],
  [/with retry as/i, 'claim retries + expired leases + begin/commit'],
  [/with o as.*commit$/is, 'record outcomes + inbox + commit'],
  // (after the batch's pending context, the handler's context statement and the previous handler's release)
  [/savepoint outbox_h\d+;\n/i, 'savepoint + handler query'],
  // a handler's later query, after the set_config of its time left (see `handlerBound`)
  [/^select set_config\('statement_timeout', \$1, true\);\n/i, 'handler query (bounded)'],
  // in a short transaction of its own, with the relay's bound
  [/outbox_due_tenants/i, 'due tenants'],
  [/^\s*(start transaction|begin)/i, 'begin'],
  [/^\s*commit/i, 'commit'],
  [/^\s*rollback to savepoint/i, 'rollback to savepoint'],
  [/^\s*rollback/i, 'rollback'],
  [/^\s*release savepoint/i, 'release savepoint'],
  [/^\s*savepoint/i, 'savepoint'],
  // before set_config: the wake-up sets synchronous_commit for its own transaction
  [/pg_notify/i, 'wake-up notify'],
  [/set_config/i, 'set tenant context'],
  [/outbox_consumer_instances/i, 'consumer registry heartbeat'],
  [/outbox_webhook_subscriptions/i, 'webhook subscriptions (cached)'],
  [/^\s*vacuum/i, 'lease table vacuum'],
  [/pg_has_role/i, 'lease table vacuum'],
  [/pg_stat_get_activity/i, 'lease table vacuum'],
  [/^\s*insert into public\.contacts/i, 'business insert'],
  [/^\s*insert into public\.event_outbox/i, 'enqueue insert'],
  [/consumer_effects/i, 'handler write'],
  [/event_outbox/i, 'other outbox statement'],
];

/**
 * Kinds a relay sends by the clock, not per batch: the due-tenant scan (at least every 100 ms while rounds go
 * by hints), the registry heartbeat and the subscription cache refresh.
 */
export const TIME_BASED_KINDS: ReadonlySet<string> = new Set([
  'due tenants',
  'consumer registry heartbeat',
  'webhook subscriptions (cached)',
]);

/**
 * Kinds a relay sends per so many events, not per batch: the lease table's VACUUM every
 * `relay.vacuumLeasesEvery` released leases (and, once, the check that the role may run it; before each, the read
 * of the vacuum horizon).
 */
export const PER_EVENTS_KINDS: ReadonlySet<string> = new Set(['lease table vacuum']);

function kindOf(query: string): string {
  for (const [pattern, kind] of KINDS) if (pattern.test(query)) return kind;
  return query.replace(/\s+/g, ' ').trim().slice(0, 40);
}

/**
 * Attach with {@link QueryProbe.attach}; read and reset with {@link QueryProbe.take}. The driver hooks only note
 * each statement and its time; `take()` — after the timed part — sorts them out.
 */
export class QueryProbe {
  private constructor(private readonly probe: RoundTripProbe | null) {}

  /** Starts watching a live DataSource's pool. */
  static attach(dataSource: DataSource): QueryProbe {
    return new QueryProbe(RoundTripProbe.attach(dataSource));
  }

  /** A probe that sees nothing (for timed runs that must not carry it). */
  static none(): QueryProbe {
    return new QueryProbe(null);
  }

  /**
   * Round trips since the last `take()` (`total`), statements, and both by kind (a kind counts round trips;
   * `statements` the statements they carried); then starts counting afresh.
   */
  take(): { total: number; statements: number; kinds: Map<string, QueryKindStats> } {
    const { statements, roundTrips } = this.probe?.take() ?? { statements: [], roundTrips: 0 };
    const trips = new Map<number, ProbedStatement[]>();
    for (const statement of statements) {
      const trip = trips.get(statement.trip) ?? [];
      trip.push(statement);
      trips.set(statement.trip, trip);
    }
    const kinds = new Map<string, QueryKindStats>();
    for (const trip of trips.values()) {
      const kind = kindOf(trip.map((s) => s.text).join(';\n'));
      const ms = Math.max(...trip.map((s) => s.ms));
      addKinds(kinds, new Map([[kind, { count: 1, ms, statements: trip.length }]]));
    }
    return { total: roundTrips, statements: statements.length, kinds };
  }
}

/** Adds the per-kind counts and times of `more` into `into`. */
export function addKinds(into: Map<string, QueryKindStats>, more: ReadonlyMap<string, QueryKindStats>): void {
  for (const [kind, stats] of more) {
    const sum = into.get(kind) ?? { count: 0, ms: 0 };
    into.set(kind, {
      count: sum.count + stats.count,
      ms: sum.ms + stats.ms,
      statements: (sum.statements ?? 0) + (stats.statements ?? 0),
    });
  }
}

/**
 * Per round, averaged over `rounds`: total SQL time, and `claim + fan out 2.31 ms ×1, …` with the slowest kinds
 * first (the `limit` slowest, when given).
 */
export function describeKinds(
  kinds: ReadonlyMap<string, QueryKindStats>,
  rounds: number,
  limit = Infinity,
): { sqlMs: number; text: string } {
  const sorted = [...kinds.entries()].sort((a, b) => b[1].ms - a[1].ms);
  const sqlMs = sorted.reduce((sum, [, s]) => sum + s.ms, 0) / rounds;
  const text = sorted
    .slice(0, limit)
    .map(([kind, s]) => `${kind} ${(s.ms / rounds).toFixed(2)} ms ×${Number((s.count / rounds).toFixed(2))}`)
    .join(', ');
  return { sqlMs, text };
}
