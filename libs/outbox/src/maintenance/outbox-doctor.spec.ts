import { outboxMigrations } from '../migrations';
import { outboxNames } from '../model/table-names';
import * as backlog from '../store/sql/doctor';
import * as horizon from '../store/sql/doctor-horizon';
import * as storage from '../store/sql/doctor-storage';
import type { SqlStatement } from '../store/sql/statement';
import { duration } from './doctor-format';
import { examineOutbox, thresholdProblems, type DoctorQuery } from './outbox-doctor';
import { OUTBOX_INDEXES } from './outbox-indexes';

/** The doctor's statements, wherever they live by role. */
const q = { ...backlog, ...horizon, ...storage };

const names = outboxNames();

/**
 * A database as the doctor's statements see it: every check healthy unless `rows` says otherwise (keyed by the
 * statement's builder). What PostgreSQL returns for each is pinned by test/operating/doctor.e2e-spec.ts; here,
 * the cases the server of the tests cannot make (prepared transactions, logical slots, WAL senders).
 */
function database(rows: Partial<Record<string, unknown[] | Error>> = {}): DoctorQuery {
  const answers = new Map<string, unknown[] | Error>([
    [
      q.doctorRole(names).text,
      [{ user_name: 'app', database: 'app', sees_all_sessions: true, row_security: false }],
    ],
    [q.outboxTables(names, []).text, rows.tables ?? []],
    [q.horizonSessions(0, 0).text, rows.sessions ?? []],
    [q.replicationSlots().text, rows.slots ?? []],
    [q.preparedTransactions().text, rows.prepared ?? []],
    [
      q.outboxIndexes(names, []).text,
      OUTBOX_INDEXES.map((i) => ({
        index_name: i.name,
        table_name: i.table,
        partitioned: false,
        valid: true,
        ready: true,
        bytes: 8192,
        bloat_bytes: 0,
        unindexed_partitions: [],
        invalid_partitions: [],
      })),
    ],
    [q.outboxPartitions(names, []).text, []],
    [q.oldestPending(names, 0).text, [{ seconds: 0, oldest: null }]],
    [q.deadDeliveries(names, 0).text, [{ dead: 0, consumers: [] }]],
    [q.findMigrationsTable('migrations').text, [{ table_sql: 'migrations', readable: true }]],
    [q.appliedMigrations('migrations').text, outboxMigrations.map((M) => ({ name: new M().name ?? M.name }))],
  ]);
  if (rows.prepared instanceof Error) answers.set(q.preparedTransactions().text, rows.prepared);
  return async <T>(statement: SqlStatement): Promise<T[]> => {
    const answer = answers.get(statement.text);
    if (answer instanceof Error) throw answer;
    if (!answer) throw new Error(`no answer for ${statement.text.slice(0, 60)}`);
    return answer as T[];
  };
}

describe('examineOutbox', () => {
  it('is ok on a healthy database, every check answered', async () => {
    const report = await examineOutbox(database(), { names });
    expect(report.severity).toBe('ok');
    expect(new Set(report.findings.map((f) => f.check))).toEqual(
      new Set([
        'transactions',
        'replication-slots',
        'prepared-transactions',
        'indexes',
        'pending',
        'dead-deliveries',
        'migrations',
      ]),
    );
  });

  it('names a prepared transaction left over, with the statements that settle it, critical after 30 min', async () => {
    const report = await examineOutbox(
      database({ prepared: [{ gid: "tx'1", owner: 'app', database: 'shop', seconds: 2400, xid_age: 900 }] }),
      { names },
    );
    const [finding] = report.findings;
    expect(finding).toMatchObject({ check: 'prepared-transactions', subject: "tx'1", severity: 'critical' });
    expect(finding!.summary).toContain('prepared for two-phase commit 40 min 0 s ago');
    expect(finding!.action).toContain("commit prepared 'tx''1'; or rollback prepared 'tx''1';");
  });

  it("names a logical slot holding the catalogs' horizon, and a WAL sender's standby", async () => {
    const report = await examineOutbox(
      database({
        slots: [
          {
            slot_name: 'cdc',
            slot_type: 'logical',
            database: 'app',
            active: true,
            active_pid: 77,
            temporary: false,
            xmin_age: null,
            catalog_xmin_age: 150_000_000,
            retained_wal_bytes: 1024,
            wal_status: 'reserved',
          },
        ],
        sessions: [
          {
            pid: 42,
            user_name: 'replicator',
            application_name: 'standby1',
            client_addr: '10.0.0.2',
            state: 'streaming',
            backend_type: 'walsender',
            xact_seconds: null,
            state_seconds: 10,
            xmin_age: 20_000_000,
            xid_age: null,
            query: '',
          },
        ],
      }),
      { names },
    );
    expect(report.severity).toBe('critical');
    const slot = report.findings.find((f) => f.check === 'replication-slots')!;
    expect(slot).toMatchObject({ severity: 'critical', subject: 'cdc' });
    expect(slot.summary).toContain("holds the system catalogs' horizon 150,000,000 transactions back");
    const sender = report.findings.find((f) => f.check === 'transactions')!;
    expect(sender).toMatchObject({ severity: 'warn', subject: 'pid 42' });
    expect(sender.action).toContain('hot_standby_feedback');
  });

  it('warns of dead rows piling up in a table autovacuum does not visit, whatever their share', async () => {
    const table = {
      table_name: 'outbox_deliveries',
      partitions: null,
      worst_partition: null,
      table_bytes: 10 * 1024 ** 3,
      index_bytes: 1024 ** 3,
      live_rows: 10_000_000,
      dead_rows: 50_000,
      last_autovacuum: null,
      last_vacuum: null,
      last_autoanalyze: null,
      since_vacuum_seconds: null,
      heap_bytes: 10 * 1024 ** 3,
      bloat_bytes: 0,
      autovacuum: false,
    };
    const off = await examineOutbox(database({ tables: [table] }), { names });
    const [finding] = off.findings;
    expect(finding).toMatchObject({ check: 'tables', subject: 'public.outbox_deliveries', severity: 'warn' });
    expect(finding!.summary).toBe(
      'public.outbox_deliveries: 11 GiB (table 10 GiB, indexes 1 GiB), ≈ 0 % bloat (0 bytes), 50,000 dead rows (0 % of rows), never vacuumed, autovacuum off.',
    );
    expect(finding!.action).toContain('alter system set autovacuum = on;');
    const on = await examineOutbox(database({ tables: [{ ...table, autovacuum: true }] }), { names });
    expect(on.severity).toBe('ok');
  });

  it('turns a check that fails into a warning saying why, and runs the others', async () => {
    const report = await examineOutbox(
      database({ prepared: new Error('permission denied for view pg_prepared_xacts') }),
      { names },
    );
    expect(report.severity).toBe('warn');
    expect(report.findings[0]).toMatchObject({ check: 'prepared-transactions', severity: 'warn' });
    expect(report.findings[0]!.summary).toContain('permission denied for view pg_prepared_xacts');
    expect(report.findings.filter((f) => f.severity === 'ok').length).toBeGreaterThan(4);
  });

  it('refuses wrong thresholds before reading anything', async () => {
    await expect(
      examineOutbox(database(), { names, thresholds: { pendingSeconds: [10, 5] } }),
    ).rejects.toThrow(/pendingSeconds must be \[warn, critical\]/);
  });
});

describe('thresholdProblems', () => {
  it('accepts known thresholds and names the unknown or malformed ones', () => {
    expect(thresholdProblems({ transactionSeconds: [60, 600], deadRowsMin: 0 })).toEqual([]);
    expect(thresholdProblems({ vacuum: 1, xidAge: [1], bloatMinBytes: -1 })).toEqual([
      expect.stringContaining('unknown threshold "vacuum"'),
      expect.stringContaining('threshold xidAge must be [warn, critical]'),
      expect.stringContaining('threshold bloatMinBytes must be a number ≥ 0'),
    ]);
    expect(thresholdProblems([])).toEqual(['thresholds must be an object, got []']);
  });
});

describe('duration', () => {
  it('reads as an on-call engineer would say it', () => {
    expect([duration(null), duration(42), duration(432), duration(7300), duration(90_000)]).toEqual([
      'an unknown time',
      '42 s',
      '7 min 12 s',
      '2 h 1 min',
      '1 d 1 h',
    ]);
  });
});
