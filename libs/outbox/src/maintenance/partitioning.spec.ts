import { partitionedLayoutProblem, partitionedLayoutSql } from './partitioning';

describe('npx nestjs-pg-outbox sql --partitioned', () => {
  it('prints the steps in order, in the schema given, with the width and ahead given', () => {
    const sql = partitionedLayoutSql('billing', { width: '6 hours', ahead: 5 });
    const statements = sql.split('\n').filter((line) => line !== '' && !line.startsWith('--'));
    expect(statements).toEqual([
      `set lock_timeout = '5s';`,
      'create unique index concurrently if not exists outbox_deliveries_id_event_key on billing.outbox_deliveries (id, event_id);',
      'create index concurrently if not exists consumer_inbox_received_idx on billing.consumer_inbox (event_id) where first_seen_at is not null;',
      "create index concurrently if not exists outbox_deliveries_ordered_open_idx on billing.outbox_deliveries (tenant_id, event_id) where aggregate_key is not null and status <> 'delivered';",
      `select billing.outbox_partition_prepare('6 hours', 5);`,
      'alter table billing.event_outbox validate constraint outbox_window;',
      'alter table billing.outbox_deliveries validate constraint outbox_window;',
      'alter table billing.consumer_inbox validate constraint outbox_window;',
      'select billing.outbox_partition_tables();',
    ]);
    expect(partitionedLayoutSql('public')).toContain(`select public.outbox_partition_prepare('1 day', 3);`);
    expect(partitionedLayoutSql('public', { start: '2026-12-06T00:00:00.000Z' })).toContain(
      `select public.outbox_partition_prepare('1 day', 3, '2026-12-06T00:00:00.000Z');`,
    );
  });

  it('refuses a width, an ahead or a start it cannot pass on safely, saying what it expects', () => {
    expect(partitionedLayoutProblem({ width: '1 week' })).toMatch(
      /--width must be a number of hours or days/,
    );
    expect(partitionedLayoutProblem({ width: "1 day'); drop table x; --" })).toMatch(/--width/);
    expect(partitionedLayoutProblem({ ahead: 0 })).toMatch(
      /--ahead must be a whole number of ranges from 1 to 1000/,
    );
    expect(partitionedLayoutProblem({ ahead: Number.NaN })).toMatch(/--ahead/);
    expect(partitionedLayoutProblem({ start: "now'); drop table x; --" })).toMatch(
      /--start must be a timestamp/,
    );
    expect(
      partitionedLayoutProblem({ width: '12 hours', ahead: 24, start: '2026-12-06 00:00:00+00' }),
    ).toBeNull();
    expect(() => partitionedLayoutSql('public', { width: '2 weeks' })).toThrow(/--width/);
  });
});
