/**
 * Counts and times every statement a TypeORM DataSource sends, by kind, through TypeORM's own query hooks
 * (a subscriber's `beforeQuery`/`afterQuery`). Used for the deterministic figure "round trips per batch" and
 * for the time split of a relay round.
 */
import { performance } from 'node:perf_hooks';
import type { DataSource, EntitySubscriberInterface, QueryRunner } from 'typeorm';

type BeforeQueryEvent = Parameters<NonNullable<EntitySubscriberInterface['beforeQuery']>>[0];
type AfterQueryEvent = Parameters<NonNullable<EntitySubscriberInterface['afterQuery']>>[0];

/** Statements of one kind: how many, and milliseconds from send to result. */
export interface QueryKindStats {
  count: number;
  ms: number;
}

/** Names a statement by what it does, so a time split reads as the relay's steps. Unknown ones keep their start. */
const KINDS: readonly [RegExp, string][] = [
  // statements sent together in one round trip (the relay's): named by their main statement
  // (the fan-out runs as `execute outbox_fan_out_…`, or its text in full when prepared statements are off; the
  // outcome of a batch of pairs as `execute outbox_outcome_…`, first since its round trip may carry the
  // preparation of both statements, texts included)
  [/execute outbox_outcome_\w+\(.*commit$/is, 'record outcomes + inbox + commit'],
  [/(with fresh as|execute outbox_fan_out_).*with retry as/is, 'claim (fan out + due) + begin/commit'],
  [/with fresh as|execute outbox_fan_out_/i, 'claim + fan out new events + begin/commit'],
  [/with retry as/i, 'claim retries + expired leases + begin/commit'],
  [/with o as.*commit$/is, 'record outcomes + inbox + commit'],
  // (after the handler's context statement and the previous handler's release, see `handlerContext`)
  [
    /^(select current_setting\(.*?;\n)?(release savepoint \w+;\n)?savepoint outbox_h\d+;\n/is,
    'savepoint + handler query',
  ],
  // a handler's later query, after the set_config of its time left (see `handlerBound`)
  [/^select set_config\('statement_timeout', '\d+', true\);\n/i, 'handler query (bounded)'],
  [/^\s*(start transaction|begin)/i, 'begin'],
  [/^\s*commit/i, 'commit'],
  [/^\s*rollback to savepoint/i, 'rollback to savepoint'],
  [/^\s*rollback/i, 'rollback'],
  [/^\s*release savepoint/i, 'release savepoint'],
  [/^\s*savepoint/i, 'savepoint'],
  [/outbox_due_tenants/i, 'due tenants'],
  // before set_config: the wake-up sets synchronous_commit for its own transaction
  [/pg_notify/i, 'wake-up notify'],
  [/set_config/i, 'set tenant context'],
  [/outbox_consumer_instances/i, 'consumer registry heartbeat'],
  [/outbox_webhook_subscriptions/i, 'webhook subscriptions (cached)'],
  [/^\s*vacuum/i, 'lease table vacuum'],
  [/pg_has_role/i, 'lease table vacuum'],
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
 * `relay.vacuumLeasesEvery` released leases (and, once, the check that the role may run it).
 */
export const PER_EVENTS_KINDS: ReadonlySet<string> = new Set(['lease table vacuum']);

/** Quoted literals (with doubled quotes inside), and E'' literals' backslash escapes. */
const LITERALS = /E?'(?:[^'\\]|''|\\.)*'/g;

function kindOf(query: string): string {
  for (const [pattern, kind] of KINDS) if (pattern.test(query)) return kind;
  return query.replace(/\s+/g, ' ').trim().slice(0, 40);
}

/**
 * Attach with {@link QueryProbe.attach}; read and reset with {@link QueryProbe.take}. The hooks run on the app's
 * query path (TypeORM calls them before a query's result is returned), where the raw baseline has nothing of the
 * kind: they only note the statement and its time, and `take()` — after the timed part — sorts them out.
 */
export class QueryProbe implements EntitySubscriberInterface {
  private readonly started = new Map<QueryRunner, number>();
  private queries: string[] = [];
  private times: number[] = [];
  private total = 0;

  /** Registers the probe on a live DataSource (TypeORM reads `subscribers` on every broadcast). */
  static attach(dataSource: DataSource): QueryProbe {
    const probe = new QueryProbe();
    dataSource.subscribers.push(probe);
    return probe;
  }

  beforeQuery(event: BeforeQueryEvent): void {
    this.total++;
    this.started.set(event.queryRunner, performance.now());
  }

  afterQuery(event: AfterQueryEvent): void {
    const began = this.started.get(event.queryRunner);
    this.started.delete(event.queryRunner);
    this.queries.push(event.query);
    this.times.push(began === undefined ? 0 : performance.now() - began);
  }

  /** Statements since the last `take()`, in total and by kind; then starts counting afresh. */
  take(): { total: number; kinds: Map<string, QueryKindStats> } {
    // The relay's statements carry their values as literals: keyed without them, few distinct texts to name.
    const byText = new Map<string, QueryKindStats>();
    this.queries.forEach((query, i) => {
      const template = query.replace(LITERALS, '?');
      const stats = byText.get(template) ?? { count: 0, ms: 0 };
      byText.set(template, { count: stats.count + 1, ms: stats.ms + this.times[i]! });
    });
    const kinds = new Map<string, QueryKindStats>();
    for (const [text, stats] of byText) addKinds(kinds, new Map([[kindOf(text), stats]]));
    const result = { total: this.total, kinds };
    this.total = 0;
    this.queries = [];
    this.times = [];
    return result;
  }
}

/** Adds the per-kind counts and times of `more` into `into`. */
export function addKinds(into: Map<string, QueryKindStats>, more: ReadonlyMap<string, QueryKindStats>): void {
  for (const [kind, stats] of more) {
    const sum = into.get(kind) ?? { count: 0, ms: 0 };
    into.set(kind, { count: sum.count + stats.count, ms: sum.ms + stats.ms });
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
