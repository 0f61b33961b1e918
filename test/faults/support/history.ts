import type { TestDatabase } from '../../support/test-database';

/** An empty effects relation, for scenarios without in-process consumers. */
const NO_EFFECTS = '(select null::uuid as event_id, null::text as consumer where false) as no_effects';

/** What a scenario's history check found. */
export interface HistoryReport {
  scenario: string;
  events: number;
  faults: number;
  lost: number;
  duplicated: number;
  phantom: number;
  leftOpen: number;
  recoveryMs: number;
}

/**
 * Checks the history after the fact: every committed event (in `event_outbox`, minus those the scenario knows
 * were never committed) reached every consumer, each consumer's table holds each event exactly once, no effect
 * names an event that does not exist (a rolled-back transaction), and nothing is left claimed or pending.
 */
export async function checkHistory(
  db: TestDatabase,
  p: {
    scenario: string;
    /** The in-process consumers' effects table; none for scenarios whose consumers are external. */
    table?: string;
    consumers: string[];
    faults: number;
    recoveryMs: number;
    expectedEvents?: readonly string[];
  },
): Promise<HistoryReport> {
  const [counts] = await db.sql<{
    events: number;
    lost: number;
    duplicated: number;
    phantom: number;
    left_open: number;
  }>(
    `with expected as (
       select e.id, c.consumer from event_outbox e cross join unnest($1::text[]) as c(consumer)
     ), got as (
       select event_id, consumer, count(*) as n from ${p.table ?? NO_EFFECTS} group by event_id, consumer
     )
     select (select count(*)::int from event_outbox) as events,
            (select count(*)::int from expected x left join got g on g.event_id = x.id and g.consumer = x.consumer where g.n is null) as lost,
            (select coalesce(sum(n - 1), 0)::int from got where n > 1) as duplicated,
            (select count(*)::int from got g where not exists (select 1 from event_outbox e where e.id = g.event_id)) as phantom,
            (select count(*)::int from outbox_deliveries where status <> 'delivered')
              + (select count(*)::int from event_outbox where status <> 'published') as left_open`,
    [p.consumers],
  );
  let lost = counts!.lost;
  if (p.expectedEvents) {
    const [missing] = await db.sql<{ n: number }>(
      `select count(*)::int n from unnest($1::uuid[]) as x(id) where not exists (select 1 from event_outbox e where e.id = x.id)`,
      [p.expectedEvents],
    );
    lost += missing!.n * p.consumers.length;
  }
  const report: HistoryReport = {
    scenario: p.scenario,
    events: counts!.events,
    faults: p.faults,
    lost,
    duplicated: counts!.duplicated,
    phantom: counts!.phantom,
    leftOpen: counts!.left_open,
    recoveryMs: p.recoveryMs,
  };
  // One line per scenario, for the README's reliability section.
  console.log(
    `[faults] ${report.scenario}: events=${report.events} faults=${report.faults} lost=${report.lost} ` +
      `duplicated=${report.duplicated} phantom=${report.phantom} left-open=${report.leftOpen} recovery=${report.recoveryMs}ms`,
  );
  return report;
}

/** Waits until nothing is pending or claimed, and returns how long that took. */
export async function timeToQuiet(db: TestDatabase, timeoutMs: number): Promise<number> {
  const began = Date.now();
  for (;;) {
    const [open] = await db.sql<{ n: number }>(
      `select ((select count(*) from outbox_deliveries where status <> 'delivered') + (select count(*) from event_outbox where status <> 'published'))::int n`,
    );
    if (open!.n === 0) return Date.now() - began;
    if (Date.now() - began > timeoutMs) throw new Error(`still ${open!.n} open rows after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
