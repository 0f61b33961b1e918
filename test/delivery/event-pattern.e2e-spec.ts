import { matchesEventPattern } from '../../libs/outbox/src/model/event-pattern';
import { eventPatternMatch, heartbeatConsumers, outboxNames } from '../../libs/outbox/src/store/sql';
import { buildApp, type TestApp } from '../support/build-app';
import { EVENT_PATTERN_CASES } from '../support/event-pattern-cases';
import { enqueueManyIn } from '../support/outbox-fixture';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

const patterns = [...new Set(EVENT_PATTERN_CASES.map((c) => c.pattern))];
const names = [...new Set(EVENT_PATTERN_CASES.map((c) => c.eventName))];
/** A consumer per pattern, hosted by no instance: fan-out writes its rows, pending, and nobody delivers them. */
const consumerOf = (pattern: string): string => `pattern-${patterns.indexOf(pattern)}`;

describe('event patterns: one table of cases, in TypeScript and in the fan-out’s SQL', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({ url: db.url });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it.each(EVENT_PATTERN_CASES)('$pattern matches $eventName: $matches (TypeScript)', (c) => {
    expect(matchesEventPattern(c.pattern, c.eventName)).toBe(c.matches);
  });

  it('agrees with every case in PostgreSQL, through the expression the fan-out uses', async () => {
    const rows = await db.sql<{ pattern: string; eventName: string; matches: boolean }>(
      `select pattern, event_name as "eventName", ${eventPatternMatch('pattern', 'event_name')} as matches
         from unnest($1::text[], $2::text[]) with ordinality as c(pattern, event_name, n) order by n`,
      [EVENT_PATTERN_CASES.map((c) => c.pattern), EVENT_PATTERN_CASES.map((c) => c.eventName)],
    );
    expect(rows).toEqual(EVENT_PATTERN_CASES);
  });

  it('fans each event out to the consumers whose pattern matches it, and to no other', async () => {
    const registry = heartbeatConsumers(
      outboxNames(),
      'event-pattern-spec',
      patterns.map((pattern) => ({ name: consumerOf(pattern), eventNames: [pattern], kind: 'webhook' })),
    );
    await db.sql(registry.text, registry.values);
    const ids = await enqueueManyIn(
      t,
      names.map((eventName) => ({ eventName })),
    );
    await t.relay.drain();
    const rows = await db.sql<{ event_id: string; consumer_name: string }>(
      'select event_id, consumer_name from outbox_deliveries',
    );
    const fannedOut = new Set(rows.map((r) => `${r.consumer_name} ${names[ids.indexOf(r.event_id)]}`));
    const seen = EVENT_PATTERN_CASES.map((c) => ({
      ...c,
      matches: fannedOut.has(`${consumerOf(c.pattern)} ${c.eventName}`),
    }));
    expect(seen).toEqual(EVENT_PATTERN_CASES);
  });
});
