import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Client } from 'pg';
import { outboxMigrations } from 'nestjs-pg-outbox';
import { OutboxHealthIndicator } from 'nestjs-pg-outbox/admin';
import {
  expectedIndexes,
  OUTBOX_INDEXES,
  OUTBOX_TABLES,
} from '../../libs/outbox/src/maintenance/outbox-indexes';
import { buildApp } from '../support/build-app';
import { TYPESCRIPT_NODE_ARGS } from '../support/child-relay';
import { waitFor } from '../support/wait-for';
import { TENANT } from '../support/outbox-fixture';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole } from '../support/test-roles';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import { partitionedLayoutStatements, runSql } from '../support/template-database';

/** How many migrations the package ships (each release adds some). */
const MIGRATIONS = outboxMigrations.length;

const CLI = join(__dirname, '..', '..', 'libs', 'outbox', 'src', 'cli', 'outbox-cli.ts');

interface Finding {
  check: string;
  subject: string | null;
  severity: 'ok' | 'warn' | 'critical';
  summary: string;
  action: string | null;
  figures: Record<string, unknown>;
}

interface Doctor {
  code: number | null;
  severity: string;
  findings: Finding[];
  stdout: string;
  stderr: string;
}

/** `npx nestjs-pg-outbox doctor --json …` on `db`, run from the source as the packaged command runs. */
function doctor(db: TestDatabase, ...args: string[]): Promise<Doctor> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...TYPESCRIPT_NODE_ARGS, CLI, 'doctor', '--url', db.url, ...args],
      { env: { ...process.env, DATABASE_URL: '' } },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const json = args.includes('--json') && code !== 3 ? JSON.parse(stdout) : null;
      resolve({
        code,
        severity: json?.severity ?? '',
        findings: json?.findings ?? [],
        stdout,
        stderr,
      });
    });
  });
}

const of = (run: Doctor, check: string) => run.findings.filter((f) => f.check === check);
const problems = (run: Doctor) => run.findings.filter((f) => f.severity !== 'ok');

/** A connection of its own, as another app's would be. */
async function connect(db: TestDatabase, applicationName: string): Promise<Client> {
  const client = new Client({ connectionString: db.url, application_name: applicationName });
  await client.connect();
  return client;
}

/** An event of `TENANT` with one delivery per `[consumer, status, age]`, straight into the tables. */
async function seedDeliveries(
  db: TestDatabase,
  deliveries: readonly [consumer: string, status: string, ageSeconds: number][],
): Promise<string> {
  const eventId = randomUUID();
  const [event] = await db.sql<{ seq: string }>(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open, deliveries_dead)
     values ($1, $2, 'test.doctor.v1', '{}', 'processing', $3, $4) returning seq`,
    [
      eventId,
      TENANT,
      deliveries.filter(([, s]) => s !== 'dead').length,
      deliveries.filter(([, s]) => s === 'dead').length,
    ],
  );
  for (const [consumer, status, age] of deliveries) {
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, last_error, created_at)
       values ($1, $2, $3, $4, $5, 2, $6, now() - $7 * interval '1 second')`,
      [eventId, TENANT, consumer, event!.seq, status, status === 'dead' ? 'card declined' : null, age],
    );
  }
  return eventId;
}

/** The outbox tables of `db`'s `schema` that are partitioned (the run's layout: OUTBOX_TEST_PARTITIONED). */
async function partitionedTables(db: TestDatabase, schema = 'public'): Promise<Set<string>> {
  const rows = await db.sql<{ relname: string }>(
    `select relname from pg_class where relnamespace = $1::regnamespace and relkind = 'p' and relname = any($2::text[])`,
    [schema, OUTBOX_TABLES],
  );
  return new Set(rows.map((r) => r.relname));
}

/** The statements of a finding's action after its first colon, each to run on its own. */
const statementsOf = (action: string): string[] =>
  action
    .slice(action.indexOf(': ') + 2)
    .replace(/;$/, '')
    .split('; ');

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

describe('npx nestjs-pg-outbox doctor', () => {
  it('finds nothing to do on a freshly migrated database, exits 0, and prints a readable report by default', async () => {
    const json = await doctor(db, '--json');
    expect(json).toMatchObject({ code: 0, severity: 'ok' });
    expect(problems(json)).toEqual([]);
    expect(of(json, 'tables').map((f) => f.subject)).toEqual(OUTBOX_TABLES.map((t) => `public.${t}`));
    expect(of(json, 'migrations')[0]!.summary).toContain(
      `${MIGRATIONS} of the ${MIGRATIONS} outbox migrations`,
    );

    const text = await doctor(db);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^nestjs-pg-outbox doctor: OK — database outbox_t_\w+, schema public/);
    expect(text.stdout).toContain(
      `OK        indexes: All ${expectedIndexes(await partitionedTables(db)).length} indexes the migrations create are there and valid.`,
    );
  });

  it('names a transaction held open on another connection: its pid, application, age, and how to end it', async () => {
    const holder = await connect(db, 'doctor-holder');
    try {
      // a snapshot (repeatable read) and a transaction id: both hold the vacuum horizon
      await holder.query('begin isolation level repeatable read');
      await holder.query('select count(*) from event_outbox');
      await holder.query('select txid_current()');
      const [{ pid }] = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows as [
        { pid: number },
      ];
      // dead rows the open snapshot keeps
      await db.sql(
        `insert into outbox_activity (tenant_id, minute, consumer_name)
         select $1, now() - g * interval '1 minute', 'doctor' from generate_series(1, 50) g`,
        [TENANT],
      );
      await db.sql(`delete from outbox_activity`);

      // under the default thresholds (5 min) a fresh transaction is no finding
      expect(problems(await doctor(db, '--json')).filter((f) => f.check === 'transactions')).toEqual([]);

      const warned = await doctor(db, '--json', '--set', 'transactionSeconds=0,3600');
      expect(warned).toMatchObject({ code: 1, severity: 'warn' });
      const [finding] = of(warned, 'transactions').filter((f) => f.subject === `pid ${pid}`);
      expect(finding).toMatchObject({ severity: 'warn', figures: { pid, applicationName: 'doctor-holder' } });
      expect(finding!.summary).toContain(`pid ${pid} (application "doctor-holder", user postgres`);
      expect(finding!.summary).toMatch(/has held a transaction open for \d+ s, idle in transaction/);
      expect(finding!.summary).toContain('vacuum cannot remove rows deleted or updated since it began');
      expect(finding!.figures.transactionSeconds).toBeGreaterThan(0);
      expect(finding!.action).toContain(`select pg_terminate_backend(${pid});`);

      const critical = await doctor(db, '--set=transactionSeconds=0,0');
      expect(critical.code).toBe(2);
      expect(critical.stdout).toContain(`CRITICAL  transactions: pid ${pid} (application "doctor-holder"`);
      expect(critical.stdout).toContain(`→ End it: select pg_terminate_backend(${pid});`);
    } finally {
      await holder.end();
    }
    const after = await doctor(db, '--json', '--set', 'transactionSeconds=0,3600');
    expect(of(after, 'transactions').map((f) => f.subject)).not.toContain('doctor-holder');
    expect(of(after, 'transactions').every((f) => f.figures.applicationName !== 'doctor-holder')).toBe(true);
  });

  it("reports a table's dead rows and bloat, and says to free the horizon before vacuuming", async () => {
    const holder = await connect(db, 'doctor-snapshot');
    const writer = await connect(db, 'doctor-writer');
    try {
      // autovacuum off for the table: the finding says so (the server's own setting differs between test servers)
      await writer.query('alter table outbox_activity set (autovacuum_enabled = false)');
      await holder.query('begin isolation level repeatable read');
      await holder.query('select count(*) from outbox_activity');
      await writer.query(
        `insert into outbox_activity (tenant_id, minute, consumer_name)
         select $1, now() - g * interval '1 minute', 'doctor' from generate_series(1, 21000) g`,
        [TENANT],
      );
      await writer.query(`delete from outbox_activity where minute < now() - interval '1000 minutes'`);
      await writer.query('analyze outbox_activity');
      await writer.query('select pg_stat_force_next_flush()');
      const table = await waitFor(
        async () => {
          const run = await doctor(db, '--json', '--set', 'bloatMinBytes=0');
          const [finding] = of(run, 'tables').filter((f) => f.subject === 'public.outbox_activity');
          return (finding?.figures.deadRows as number) >= 20_000 ? finding : null;
        },
        { timeoutMs: 20_000 },
      );
      expect(table.severity).toBe('critical');
      expect(table.summary).toMatch(
        /^public\.outbox_activity: .+, ≈ \d+ % bloat \(.+\), 20,\d\d\d dead rows \(\d+ % of rows\)/,
      );
      // the 20,000 deleted here, plus the earlier test's rows when autovacuum has not yet removed them
      expect(table.figures.deadRows as number).toBeLessThan(21_000);
      expect(table.figures.bloatBytes as number).toBeGreaterThan(0);
      expect(table.action).toContain('if a transaction or slot above holds the horizon, deal with it first');
      expect(table.action).toContain('vacuum (verbose, analyze) public.outbox_activity;');
      expect(table.action).toContain('pg_repack');
      expect(table.figures.autovacuum).toBe(false);
      expect(table.summary).toMatch(/, autovacuum off\.$/);
      expect(table.action).toContain('alter table public.outbox_activity reset (autovacuum_enabled);');
    } finally {
      await holder.end();
      // vacuum can remove them now: the table is back to empty for the checks below
      await writer.query('delete from outbox_activity');
      await writer.query('alter table outbox_activity reset (autovacuum_enabled)');
      await writer.query('vacuum analyze outbox_activity');
      await writer.end();
    }
  });

  it('names an inactive replication slot that keeps WAL, and says how to drop it', async () => {
    const slot = `doctor_${randomBytes(4).toString('hex')}`;
    await db.sql(`select pg_create_physical_replication_slot($1, true)`, [slot]);
    try {
      const run = await doctor(db, '--json');
      const [finding] = of(run, 'replication-slots').filter((f) => f.subject === slot);
      expect(finding).toMatchObject({ severity: 'warn', figures: { type: 'physical', active: false } });
      expect(finding!.summary).toMatch(
        new RegExp(`physical replication slot "${slot}" is inactive and keeps .+ of WAL on disk`),
      );
      expect(finding!.action).toContain(`select pg_drop_replication_slot('${slot}');`);
      expect(run.code).toBeGreaterThanOrEqual(1);
    } finally {
      await db.sql(`select pg_drop_replication_slot($1)`, [slot]);
    }
    const after = await doctor(db, '--json');
    expect(of(after, 'replication-slots').map((f) => f.subject)).not.toContain(slot);
  });

  it('says a dropped index is missing, and the statement it gives puts it back', async () => {
    await db.sql(`drop index outbox_deliveries_dead_idx`);
    const run = await doctor(db, '--json');
    expect(run).toMatchObject({ code: 2, severity: 'critical' });
    const [finding] = of(run, 'indexes');
    expect(finding).toMatchObject({ severity: 'critical', subject: 'public.outbox_deliveries_dead_idx' });
    expect(finding!.summary).toContain('is missing');
    const statements = statementsOf(finding!.action!);
    const definition = `using btree (tenant_id, consumer_name) where (status = 'dead'::text)`;
    const partitioned = (await partitionedTables(db)).has('outbox_deliveries');
    if (partitioned) {
      // the parent alone, then each partition concurrently and attached: PostgreSQL refuses concurrently on a parent
      expect(statements[0]).toBe(
        `create index if not exists outbox_deliveries_dead_idx on only public.outbox_deliveries ${definition}`,
      );
      expect(statements.slice(1).filter((s) => s.startsWith('alter index'))).toContain(
        'alter index public.outbox_deliveries_dead_idx attach partition public.outbox_deliveries_dead_idx_default',
      );
      expect(statements.slice(1).every((s) => /^(create index concurrently|alter index) /.test(s))).toBe(
        true,
      );
    } else {
      expect(statements).toEqual([
        `create index concurrently if not exists outbox_deliveries_dead_idx on public.outbox_deliveries ${definition}`,
      ]);
    }
    for (const statement of statements) await db.sql(statement);
    expect(problems(await doctor(db, '--json'))).toEqual([]);
  });

  it('says an index left invalid by a failed create index concurrently is invalid, and how to rebuild it', async () => {
    // duplicate minutes make a unique build fail, leaving an invalid index under the expected name
    await db.sql(`drop index outbox_activity_minute_idx`);
    await db.sql(
      `insert into outbox_activity (tenant_id, minute, consumer_name) values ($1, '2026-12-05T00:00Z', 'a'), ($1, '2026-12-05T00:00Z', 'b')`,
      [TENANT],
    );
    await expect(
      db.sql(`create unique index concurrently outbox_activity_minute_idx on outbox_activity (minute)`),
    ).rejects.toThrow(/could not create unique index/);
    const run = await doctor(db, '--json');
    const [finding] = of(run, 'indexes');
    expect(finding).toMatchObject({
      severity: 'critical',
      subject: 'public.outbox_activity_minute_idx',
      figures: { valid: false },
    });
    expect(finding!.summary).toContain('is invalid');
    expect(finding!.action).toContain(
      'drop index concurrently public.outbox_activity_minute_idx; then create index concurrently if not exists outbox_activity_minute_idx on public.outbox_activity using btree (minute);',
    );
    await db.sql(`drop index concurrently public.outbox_activity_minute_idx`);
    await db.sql(
      `create index concurrently outbox_activity_minute_idx on public.outbox_activity using btree (minute)`,
    );
    await db.sql(`delete from outbox_activity`);
    expect(of(await doctor(db, '--json'), 'indexes')).toMatchObject([{ severity: 'ok' }]);
  });

  it('reports the oldest pending delivery with its consumer and tenant, and counts dead deliveries per consumer', async () => {
    const eventId = await seedDeliveries(db, [
      ['doctor.mailer', 'pending', 2 * 3600],
      ['doctor.billing', 'dead', 60],
      ['doctor.ledger', 'dead', 60],
    ]);
    await seedDeliveries(db, [['doctor.billing', 'dead', 30]]);
    try {
      const run = await doctor(db, '--json');
      expect(run.code).toBe(2);
      const [pending] = of(run, 'pending');
      expect(pending).toMatchObject({
        severity: 'critical',
        figures: { consumer: 'doctor.mailer', tenantId: TENANT, eventId },
      });
      expect(pending!.figures.oldestPendingSeconds).toBeGreaterThanOrEqual(7200);
      expect(pending!.summary).toMatch(/^The oldest work not done is 2 h 0 min old\./);
      expect(pending!.summary).toContain(`to consumer "doctor.mailer" of tenant ${TENANT}`);
      const [dead] = of(run, 'dead-deliveries');
      expect(dead).toMatchObject({ severity: 'warn', figures: { dead: 3 } });
      expect(dead!.summary).toBe('3 dead deliveries ("doctor.billing": 2, "doctor.ledger": 1).');
      expect(dead!.action).toContain('replay them (replayFailed) or purge them (purgeFailed)');

      const relaxed = await doctor(
        db,
        '--json',
        '--set',
        'pendingSeconds=86400,86400',
        '--set',
        'deadDeliveries=5,10',
      );
      expect(relaxed).toMatchObject({ code: 0, severity: 'ok' });
    } finally {
      await db.sql(`delete from outbox_deliveries where consumer_name like 'doctor.%'`);
      await db.sql(`delete from event_outbox where event_name = 'test.doctor.v1'`);
    }
  });

  it('says which outbox migrations are not applied, and when the migrations table is not there', async () => {
    const [row] = await db.sql<{ id: number; timestamp: string; name: string }>(
      `delete from migrations where name = 'OutboxPurgeRelayInbox1764500800000' returning id, timestamp, name`,
    );
    try {
      const run = await doctor(db, '--json');
      expect(run.code).toBe(2);
      const [finding] = of(run, 'migrations');
      expect(finding).toMatchObject({
        severity: 'critical',
        figures: { expected: MIGRATIONS, applied: MIGRATIONS - 1 },
      });
      expect(finding!.summary).toContain('missing: OutboxPurgeRelayInbox1764500800000');
      expect(finding!.action).toContain('npx nestjs-pg-outbox sql');
    } finally {
      await db.sql(`insert into migrations (id, timestamp, name) values ($1, $2, $3)`, [
        row!.id,
        row!.timestamp,
        row!.name,
      ]);
    }
    const elsewhere = await doctor(db, '--json', '--migrations-table', 'app_migrations');
    expect(of(elsewhere, 'migrations')).toMatchObject([{ severity: 'warn', subject: 'app_migrations' }]);
    expect(of(await doctor(db, '--json'), 'migrations')).toMatchObject([{ severity: 'ok' }]);
  });

  it("runs as the app's relay role under row-level security, and says what that role could not see", async () => {
    const role = await createLoginRole(db, 'outbox_relay');
    await seedDeliveries(db, [['doctor.mailer', 'pending', 2 * 3600]]);
    try {
      const run = await doctor({ ...db, url: role.url }, '--json');
      const report = JSON.parse(run.stdout);
      expect(report.role).toEqual({ name: role.name, seesAllSessions: false, rowSecurity: true });
      // every tenant's backlog, through the migrations' SECURITY DEFINER function; the row itself is hidden
      expect(of(run, 'pending')).toMatchObject([
        { severity: 'critical', figures: { consumer: null, oldestPendingSeconds: expect.any(Number) } },
      ]);
      expect(of(run, 'dead-deliveries')[0]!.summary).toContain(
        `row-level security shows role ${role.name} one tenant's rows only`,
      );
      expect(of(run, 'transactions')[0]!.summary).toContain(`grant pg_read_all_stats to ${role.name}`);
      const [migrations] = of(run, 'migrations');
      expect(migrations).toMatchObject({ severity: 'warn', subject: 'migrations' });
      expect(migrations!.action).toContain(`grant select on migrations to ${role.name};`);
      expect(of(run, 'indexes')).toMatchObject([{ severity: 'ok' }]);
      expect(run.code).toBe(2);
    } finally {
      await db.sql(`delete from outbox_deliveries where consumer_name like 'doctor.%'`);
      await db.sql(`delete from event_outbox where event_name = 'test.doctor.v1'`);
      await role.drop();
    }
  });

  it('checks an outbox in another schema', async () => {
    const other = await createTestDatabase([], { schema: 'doctor_billing' });
    try {
      const run = await doctor(other, '--json', '--schema', 'doctor_billing');
      expect(problems(run)).toEqual([]);
      expect(of(run, 'migrations')[0]!.summary).toContain(
        `${MIGRATIONS} of the ${MIGRATIONS} outbox migrations of schema doctor_billing`,
      );
      expect(of(run, 'tables')[0]!.subject).toBe('"doctor_billing".consumer_inbox');
      // the public schema of that database has no outbox: every index is missing there
      const wrong = await doctor(other, '--json');
      expect(of(wrong, 'indexes').filter((f) => f.summary.includes('is missing'))).toHaveLength(
        OUTBOX_INDEXES.length,
      );
    } finally {
      await other.drop();
    }
  });

  it('refuses a bad option, or a database it cannot reach, with exit code 3 and why', async () => {
    const unknown = await doctor(db, '--set', 'vacuumSeconds=1,2');
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toContain('unknown threshold "vacuumSeconds"');
    const backwards = await doctor(db, '--set', 'pendingSeconds=10,5');
    expect(backwards.code).toBe(3);
    expect(backwards.stderr).toContain('threshold pendingSeconds must be [warn, critical]');
    const nowhere = await new Promise<Doctor>((resolve) => {
      const child = spawn(process.execPath, [
        ...TYPESCRIPT_NODE_ARGS,
        CLI,
        'doctor',
        '--url',
        'postgres://nobody:secret@127.0.0.1:1/none',
      ]);
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('close', (code) => resolve({ code, severity: '', findings: [], stdout: '', stderr }));
    });
    expect(nowhere.code).toBe(3);
    expect(nowhere.stderr).toContain('could not check postgres://nobody:***@127.0.0.1:1/none');
    expect(nowhere.stderr).not.toContain('secret');
  });
});

describe('the indexes the doctor expects', () => {
  it('are exactly those the migrations create, in public and in another schema', async () => {
    const other = await createTestDatabase([], { schema: 'doctor_pinned' });
    try {
      for (const [database, schema] of [
        [db, 'public'],
        [other, 'doctor_pinned'],
      ] as const) {
        const rows = await database.sql<{
          table: string;
          name: string;
          definition: string;
          constraint: string | null;
        }>(
          `select t.relname as table, i.relname as name,
                  lower(regexp_replace(pg_get_indexdef(i.oid), '^.* USING ', 'using ')) as definition,
                  lower(pg_get_constraintdef(c.oid)) as constraint
             from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class t on t.oid = x.indrelid
             left join pg_constraint c on c.conindid = i.oid and c.contype in ('p', 'u')
            where t.relnamespace = $1::regnamespace and t.relname = any($2::text[])
            order by t.relname, i.relname`,
          [schema, OUTBOX_TABLES],
        );
        const expected = expectedIndexes(await partitionedTables(database, schema));
        expect(
          rows.map((r) =>
            r.constraint
              ? { table: r.table, name: r.name, constraint: r.constraint }
              : { table: r.table, name: r.name, definition: r.definition },
          ),
        ).toEqual(expected);
      }
    } finally {
      await other.drop();
    }
  });
});

describe('the doctor on the partitioned layout (docs/partitioning.md)', () => {
  let parted: TestDatabase;
  /** Today's range (UTC) of `event_outbox`, where UUIDv7 ids made now go. */
  let today: string;

  beforeAll(async () => {
    // migrated here and converted, whatever layout the run's template has
    parted = await createTestDatabase([], { runMigrations: true });
    await runSql(parted.url, partitionedLayoutStatements(new Date(Date.now() - 86_400_000)));
    const day = new Date().toISOString().slice(0, 10).replaceAll('-', '');
    today = `event_outbox_p${day}t0000`;
  });

  afterAll(async () => {
    await parted?.drop();
  });

  it('sizes a partitioned table by its partitions and names the one with the most dead rows, whose vacuum it advises', async () => {
    await parted.sql(`alter table ${today} set (autovacuum_enabled = false)`);
    // UUIDv7 ids of now: today's range
    await parted.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at)
       select (lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || '7' ||
               substr(md5(g::text), 1, 3) || '8' || substr(md5(g::text), 4, 15))::uuid,
              $1, 'test.doctor.v1', '{}', 'published', now()
         from generate_series(1, 3000) g`,
      [TENANT],
    );
    const [{ partition }] = (await parted.sql<{ partition: string }>(
      `select distinct tableoid::regclass::text as partition from event_outbox`,
    )) as [{ partition: string }];
    expect(partition).toBe(today);
    await parted.sql(`delete from event_outbox where event_name = 'test.doctor.v1'`);
    await parted.sql(`select pg_stat_force_next_flush()`);
    const table = await waitFor(
      async () => {
        const run = await doctor(
          parted,
          '--json',
          '--set',
          'deadRowsMin=1000',
          '--set',
          'deadRowsRatio=0.5,0.9',
        );
        const [finding] = of(run, 'tables').filter((f) => f.subject === 'public.event_outbox');
        return (finding?.figures.deadRows as number) >= 3000 ? finding : null;
      },
      { timeoutMs: 20_000 },
    );
    expect(table.figures.tableBytes as number).toBeGreaterThan(0);
    expect(table.figures.partitions as number).toBeGreaterThanOrEqual(5);
    expect(table.figures.worstPartition).toBe(today);
    expect(table.severity).toBe('critical');
    expect(table.summary).toMatch(/^public\.event_outbox \(\d+ partitions\): /);
    expect(table.summary).toContain(`partition ${today} (the most dead rows)`);
    expect(table.action).toContain(`vacuum (verbose, analyze) public.${today};`);
    expect(table.action).toContain(`alter table public.${today} reset (autovacuum_enabled);`);
    await parted.sql(`alter table ${today} reset (autovacuum_enabled)`);
    await parted.sql(`vacuum event_outbox`);
  });

  it('finds a partitioned index missing or without its partitions, and the steps it gives build it without blocking writes', async () => {
    const fresh = await doctor(parted, '--json');
    expect(problems(fresh)).toEqual([]);
    expect(of(fresh, 'indexes')[0]!.summary).toBe(
      // the layout's two more: the received inbox messages' and the ordered consumers' open deliveries'
      `All ${OUTBOX_INDEXES.length + 2} indexes the migrations create are there and valid.`,
    );

    await parted.sql(`drop index event_outbox_scheduled_idx`);
    const [missing] = of(await doctor(parted, '--json'), 'indexes');
    expect(missing).toMatchObject({ severity: 'critical', subject: 'public.event_outbox_scheduled_idx' });
    expect(missing!.action).toContain('PostgreSQL refuses create index concurrently on a partitioned table');
    for (const statement of statementsOf(missing!.action!)) await parted.sql(statement);
    expect(problems(await doctor(parted, '--json'))).toEqual([]);

    // on the parent alone: invalid until every partition has it
    await parted.sql(`drop index outbox_deliveries_dead_idx`);
    await parted.sql(
      `create index outbox_deliveries_dead_idx on only outbox_deliveries using btree (tenant_id, consumer_name) where (status = 'dead'::text)`,
    );
    const partitions = await parted.sql<{ relname: string }>(
      `select c.relname from pg_partition_tree('outbox_deliveries') p join pg_class c on c.oid = p.relid where p.isleaf`,
    );
    const [invalid] = of(await doctor(parted, '--json'), 'indexes');
    expect(invalid).toMatchObject({
      severity: 'critical',
      subject: 'public.outbox_deliveries_dead_idx',
      figures: { valid: false, unindexedPartitions: partitions.length, invalidPartitions: 0 },
    });
    expect(invalid!.summary).toContain(
      'partitions without it: outbox_deliveries_default, outbox_deliveries_p',
    );
    const steps = statementsOf(invalid!.action!);
    expect(steps).toHaveLength(2 * partitions.length);
    for (const statement of steps) await parted.sql(statement);
    expect(problems(await doctor(parted, '--json'))).toEqual([]);
  });
});

describe("the doctor's steps on partitions it did not make (review of issue 37)", () => {
  let parted: TestDatabase;

  // a database each: a test that fails leaves an index half built
  beforeEach(async () => {
    parted = await createTestDatabase([], { runMigrations: true });
    await runSql(parted.url, partitionedLayoutStatements(new Date(Date.now() - 86_400_000)));
  });

  afterEach(async () => {
    await parted?.drop();
  });

  it('quotes a partition whose name needs quotes, in the steps that rebuild a missing index', async () => {
    // a range of 1970 attached by hand under a name that needs quotes (an archive, say)
    await parted.sql(
      `create table "event_outbox_Archive" partition of event_outbox
         for values from ('00000000-0000-0000-0000-000000000000') to ('00000001-0000-0000-0000-000000000000')`,
    );
    await parted.sql(`drop index event_outbox_scheduled_idx`);
    const [missing] = of(await doctor(parted, '--json'), 'indexes');
    expect(missing).toMatchObject({ severity: 'critical', subject: 'public.event_outbox_scheduled_idx' });
    for (const statement of statementsOf(missing!.action!)) await parted.sql(statement);
    expect(problems(await doctor(parted, '--json'))).toEqual([]);
  });

  it("its steps finish the job after a partition's concurrent build was cancelled (a leftover invalid index)", async () => {
    await parted.sql(`drop index event_outbox_pending_idx`);
    const [missing] = of(await doctor(parted, '--json'), 'indexes');
    const steps = statementsOf(missing!.action!);
    const build = steps.find(
      (s) => s.startsWith('create index concurrently') && s.includes('event_outbox_default'),
    )!;
    expect(build).toBeDefined();
    await parted.sql(steps[0]!); // on only the parent

    // a writer holds the default partition: the build waits for it, and is cancelled (ctrl-C, a statement_timeout)
    const writer = await connect(parted, 'writer');
    const builder = await connect(parted, 'builder');
    try {
      await writer.query(`begin; lock table event_outbox_default in row exclusive mode`);
      const [{ pid }] = (await builder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows as [
        { pid: number },
      ];
      const building = builder.query(build).then(
        () => null,
        (error: Error) => error,
      );
      await waitFor(
        async () =>
          (
            await parted.sql<{ waiting: boolean }>(
              `select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = $1`,
              [pid],
            )
          )[0]?.waiting,
        { timeoutMs: 20_000, message: 'the build to wait for the writer' },
      );
      await parted.sql('select pg_cancel_backend($1)', [pid]);
      expect((await building)?.message).toMatch(/canceling statement/);
      await writer.query('rollback');
    } finally {
      await writer.end();
      await builder.end();
    }

    // the on-call engineer asks the doctor again and runs what it says, once
    const [again] = of(await doctor(parted, '--json'), 'indexes');
    expect(again).toMatchObject({ severity: 'critical', subject: 'public.event_outbox_pending_idx' });
    for (const statement of statementsOf(again!.action!)) await parted.sql(statement);
    expect(problems(await doctor(parted, '--json'))).toEqual([]);
  });

  it('gives steps that work in another schema', async () => {
    const other = await createTestDatabase([], { schema: 'doctor_parts' });
    try {
      const day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
      await runSql(
        other.url,
        partitionedLayoutSql('"doctor_parts"', { start: `${day}T00:00:00Z`, ahead: 3 })
          .split('\n')
          .filter((line) => line.trim() !== '' && !line.startsWith('--')),
      );
      await other.sql(`drop index doctor_parts.outbox_deliveries_due_idx`);
      const [missing] = of(await doctor(other, '--json', '--schema', 'doctor_parts'), 'indexes');
      expect(missing).toMatchObject({
        severity: 'critical',
        subject: '"doctor_parts".outbox_deliveries_due_idx',
      });
      for (const statement of statementsOf(missing!.action!)) await other.sql(statement);
      const run = await doctor(other, '--json', '--schema', 'doctor_parts');
      expect(problems(run)).toEqual([]);
      expect(
        of(run, 'tables').find((f) => f.subject === '"doctor_parts".event_outbox')!.figures.partitions,
      ).toBeGreaterThanOrEqual(5);
    } finally {
      await other.drop();
    }
  });
});

describe('the doctor in the health indicator', () => {
  it('is down on a critical finding, lists warnings without failing, and is left out unless asked for', async () => {
    const app = await buildApp({ url: db.url });
    try {
      const health = app.app.get(OutboxHealthIndicator);
      expect((await health.isHealthy('outbox', { doctor: true })).outbox).toMatchObject({
        status: 'up',
        doctor: { severity: 'ok', findings: [] },
      });
      const slot = `doctor_${randomBytes(4).toString('hex')}`;
      await db.sql(`select pg_create_physical_replication_slot($1, true)`, [slot]);
      try {
        const warned = (await health.isHealthy('outbox', { doctor: true })).outbox;
        expect(warned.status).toBe('up');
        expect(warned.doctor?.findings).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ check: 'replication-slots', subject: slot, severity: 'warn' }),
          ]),
        );
      } finally {
        await db.sql(`select pg_drop_replication_slot($1)`, [slot]);
      }
      await db.sql(`drop index event_outbox_settled_idx`);
      try {
        const down = (await health.isHealthy('outbox', { doctor: { pendingSeconds: [60, 120] } })).outbox;
        expect(down).toMatchObject({ status: 'down', doctor: { severity: 'critical' } });
        expect(down.message).toContain(
          'doctor: Index public.event_outbox_settled_idx on public.event_outbox is missing',
        );
        expect((await health.isHealthy('outbox')).outbox).toMatchObject({ status: 'up' });
        expect((await health.isHealthy('outbox')).outbox.doctor).toBeUndefined();
      } finally {
        await db.sql(
          `create index event_outbox_settled_idx on event_outbox using btree (published_at) where (status = any (array['published'::text, 'no_handlers'::text]))`,
        );
      }
    } finally {
      await app.close();
    }
  });
});
