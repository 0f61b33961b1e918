/**
 * The doctor: reads what holds the vacuum horizon back, the outbox tables' size, bloat and vacuum state, the
 * indexes, the backlog, dead deliveries and the migrations applied, and says for each how bad it is and what to
 * do. One place for the checks' logic, behind a query function: `npx nestjs-pg-outbox doctor` gives it a pg
 * client, `OutboxAdminService.doctor()` (the health indicator, the board) the app's DataSource. The statements are
 * in `store/sql/doctor.ts`. Decisions: docs/adr/1010-a-doctor-in-one-place.md.
 */
import { errorText } from '../errors/error-text';
import { OUTBOX_DEFAULTS } from '../options/outbox-options';
import { outboxMigrations } from '../migrations';
import { migrationNameInSchema } from '../migrations/outbox-migrations.factory';
import type {
  OutboxDoctorCheck,
  OutboxDoctorFinding,
  OutboxDoctorReport,
  OutboxDoctorSeverity,
  OutboxDoctorThresholds,
} from '../model/outbox-doctor-report.interface';
import type { OutboxNames } from '../model/table-names';
import type { SqlStatement } from '../store/sql/statement';
import * as q from '../store/sql/doctor';
import { OUTBOX_INDEXES, OUTBOX_TABLES, recreateIndexSql } from './outbox-indexes';

/** Runs one statement and returns its rows: the doctor's only way to the database. */
export type DoctorQuery = <T>(statement: SqlStatement) => Promise<T[]>;

/** What the doctor needs to know besides the database. */
export interface OutboxDoctorOptions {
  /** The outbox's names (its schema). */
  names: OutboxNames;
  /**
   * Consumers no instance reported for this long are left out of the backlog (`registry.orphanAfterMs`).
   * Default: the module's default, one hour.
   */
  orphanAfterMs?: number;
  /** TypeORM's migrations table, as the app's DataSource names it (`migrationsTableName`). Default: `'migrations'`. */
  migrationsTable?: string;
  /** Thresholds; each has a default. */
  thresholds?: OutboxDoctorThresholds;
}

/** The thresholds' defaults (docs/doctor.md says why each). */
export const DEFAULT_DOCTOR_THRESHOLDS: Required<OutboxDoctorThresholds> = {
  transactionSeconds: [300, 1800],
  xidAge: [10_000_000, 100_000_000],
  slotWalBytes: [1024 ** 3, 10 * 1024 ** 3],
  pendingSeconds: [300, 3600],
  deadDeliveries: [1, 1000],
  bloatRatio: [0.5, 0.8],
  bloatMinBytes: 64 * 1024 ** 2,
  deadRowsRatio: [0.2, 0.5],
  deadRowsMin: 10_000,
};

/** Sessions listed by the transactions check at most. */
const SESSIONS_LISTED = 5;
/** Dead deliveries counted at most (the count reads the dead index). */
const DEAD_COUNT_CAP = 100_000;

const RANK: Record<OutboxDoctorSeverity, number> = { ok: 0, warn: 1, critical: 2 };

/** The worse of severities. */
export function worstSeverity(severities: readonly OutboxDoctorSeverity[]): OutboxDoctorSeverity {
  return severities.reduce<OutboxDoctorSeverity>((a, b) => (RANK[b] > RANK[a] ? b : a), 'ok');
}

/** The problems with thresholds given by a user (an empty list when they are fine). */
export function thresholdProblems(thresholds: unknown): string[] {
  if (thresholds === undefined) return [];
  if (typeof thresholds !== 'object' || thresholds === null || Array.isArray(thresholds))
    return [`thresholds must be an object, got ${JSON.stringify(thresholds)}`];
  const problems: string[] = [];
  for (const [key, value] of Object.entries(thresholds)) {
    const fallback = (DEFAULT_DOCTOR_THRESHOLDS as Record<string, unknown>)[key];
    if (fallback === undefined) {
      problems.push(
        `unknown threshold "${key}" (known: ${Object.keys(DEFAULT_DOCTOR_THRESHOLDS).join(', ')})`,
      );
    } else if (Array.isArray(fallback)) {
      const ok =
        Array.isArray(value) &&
        value.length === 2 &&
        value.every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0) &&
        (value[0] as number) <= (value[1] as number);
      if (!ok)
        problems.push(
          `threshold ${key} must be [warn, critical], two numbers ≥ 0 with warn ≤ critical, got ${JSON.stringify(value)}`,
        );
    } else if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      problems.push(`threshold ${key} must be a number ≥ 0, got ${JSON.stringify(value)}`);
    }
  }
  return problems;
}

/** Runs every check; never throws for a check that fails (it becomes a `warn` finding saying why). */
export async function examineOutbox(
  query: DoctorQuery,
  options: OutboxDoctorOptions,
): Promise<OutboxDoctorReport> {
  const problems = thresholdProblems(options.thresholds);
  if (problems.length > 0) throw new Error(`the doctor's thresholds are wrong: ${problems.join('; ')}`);
  const t = { ...DEFAULT_DOCTOR_THRESHOLDS, ...options.thresholds };
  const n = options.names;
  const [role] = await query<{
    user_name: string;
    database: string;
    sees_all_sessions: boolean;
    row_security: boolean;
  }>(q.doctorRole(n));
  const ctx: Context = {
    query,
    n,
    t,
    role: role!,
    findings: [],
    deadRows: null,
  };
  // tables first: the horizon's findings say how many dead rows wait on it
  await check(ctx, 'tables', () => checkTables(ctx));
  await check(ctx, 'transactions', () => checkTransactions(ctx));
  await check(ctx, 'replication-slots', () => checkSlots(ctx));
  await check(ctx, 'prepared-transactions', () => checkPrepared(ctx));
  await check(ctx, 'indexes', () => checkIndexes(ctx));
  await check(ctx, 'pending', () =>
    checkPending(ctx, options.orphanAfterMs ?? OUTBOX_DEFAULTS.registry.orphanAfterMs),
  );
  await check(ctx, 'dead-deliveries', () => checkDead(ctx));
  await check(ctx, 'migrations', () => checkMigrations(ctx, options.migrationsTable ?? 'migrations'));
  const order: OutboxDoctorCheck[] = [
    'transactions',
    'replication-slots',
    'prepared-transactions',
    'pending',
    'dead-deliveries',
    'indexes',
    'migrations',
    'tables',
  ];
  const findings = [...ctx.findings].sort(
    (a, b) => RANK[b.severity] - RANK[a.severity] || order.indexOf(a.check) - order.indexOf(b.check),
  );
  return {
    severity: worstSeverity(findings.map((f) => f.severity)),
    checkedAt: new Date(),
    database: role!.database,
    schema: n.schema,
    role: {
      name: role!.user_name,
      seesAllSessions: role!.sees_all_sessions,
      rowSecurity: role!.row_security,
    },
    findings,
  };
}

interface Context {
  query: DoctorQuery;
  n: OutboxNames;
  t: Required<OutboxDoctorThresholds>;
  role: { user_name: string; sees_all_sessions: boolean; row_security: boolean };
  findings: OutboxDoctorFinding[];
  /** Dead rows in the outbox tables, once the tables check has read them. */
  deadRows: number | null;
}

async function check(ctx: Context, name: OutboxDoctorCheck, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    ctx.findings.push({
      check: name,
      subject: null,
      severity: 'warn',
      summary: `Could not run the ${name} check: ${errorText(error)}.`,
      action:
        `Run the doctor as a role that may read the outbox tables and the statistics views (the tables' owner, ` +
        `or a member of pg_read_all_stats), on a schema the outbox migrations built.`,
      figures: {},
    });
  }
}

function push(ctx: Context, finding: OutboxDoctorFinding): void {
  ctx.findings.push(finding);
}

/** The severity of `value` against `[warn, critical]`. */
function level(value: number | null, [warn, critical]: readonly [number, number]): OutboxDoctorSeverity {
  if (value === null) return 'ok';
  if (value >= critical) return 'critical';
  return value >= warn ? 'warn' : 'ok';
}

async function checkTransactions(ctx: Context): Promise<void> {
  const { t } = ctx;
  const rows = await ctx.query<q.HorizonSessionRow>(
    q.horizonSessions(t.transactionSeconds[0], SESSIONS_LISTED),
  );
  const hidden = ctx.role.sees_all_sessions
    ? ''
    : ` (role ${ctx.role.user_name} sees only its own sessions' transactions: grant pg_read_all_stats to ${ctx.role.user_name}, or run the doctor as a superuser, to see every session)`;
  let listed = 0;
  for (const row of rows) {
    const xidAge = Math.max(row.xmin_age ?? 0, row.xid_age ?? 0);
    const severity = worstSeverity([level(row.xact_seconds, t.transactionSeconds), level(xidAge, t.xidAge)]);
    if (severity === 'ok') continue;
    listed++;
    push(ctx, {
      check: 'transactions',
      subject: `pid ${row.pid}`,
      severity,
      summary: sessionSummary(row, xidAge, ctx.deadRows, ctx.n.schema),
      action: sessionAction(row),
      figures: {
        pid: row.pid,
        user: row.user_name,
        applicationName: row.application_name,
        clientAddr: row.client_addr,
        state: row.state,
        transactionSeconds: round(row.xact_seconds),
        stateSeconds: round(row.state_seconds),
        xminAge: row.xmin_age,
        xidAge: row.xid_age,
        query: row.query,
      },
    });
  }
  if (listed > 0) return;
  const oldest = rows[0];
  push(ctx, {
    check: 'transactions',
    subject: null,
    severity: 'ok',
    summary:
      (oldest
        ? `No transaction holds the vacuum horizon back for long: the oldest, pid ${oldest.pid}, is ${duration(oldest.xact_seconds)} old.`
        : 'No transaction holds the vacuum horizon back.') + hidden,
    action: null,
    figures: {
      oldestPid: oldest?.pid ?? null,
      oldestTransactionSeconds: round(oldest?.xact_seconds ?? null),
      seesAllSessions: ctx.role.sees_all_sessions,
    },
  });
}

function sessionSummary(
  row: q.HorizonSessionRow,
  xidAge: number,
  deadRows: number | null,
  schema: string,
): string {
  const who = [
    row.application_name ? `application "${row.application_name}"` : null,
    row.user_name ? `user ${row.user_name}` : null,
    row.client_addr ? `from ${row.client_addr}` : null,
    row.backend_type && row.backend_type !== 'client backend' ? row.backend_type : null,
  ].filter((part) => part !== null);
  const state =
    row.state === 'idle in transaction' || row.state === 'idle in transaction (aborted)'
      ? `, ${row.state} for ${duration(row.state_seconds)}`
      : row.state
        ? `, ${row.state}`
        : '';
  const held =
    row.xmin_age !== null || row.xid_age !== null
      ? `; its ${row.xid_age !== null ? 'transaction id' : 'snapshot'} is ${count(xidAge)} transactions old, and vacuum cannot remove rows deleted or updated since it began` +
        (deadRows
          ? ` (statistics count ${count(deadRows)} dead rows in the outbox tables of schema ${schema} now)`
          : '')
      : '; it holds no snapshot, but keeps its locks until it ends';
  return `pid ${row.pid} (${who.join(', ') || 'unknown session'}) has held a transaction open for ${duration(row.xact_seconds)}${state}${held}.`;
}

function sessionAction(row: q.HorizonSessionRow): string {
  const pid = row.pid;
  const role = row.user_name ?? '<role>';
  if (row.backend_type === 'walsender') {
    return (
      `pid ${pid} sends WAL to a standby with hot_standby_feedback on: a long query on that standby holds the ` +
      `horizon. Find it in the standby's pg_stat_activity and cancel it, or set max_standby_streaming_delay there.`
    );
  }
  if (row.state?.startsWith('idle in transaction')) {
    return (
      `End it: select pg_terminate_backend(${pid}); (its transaction rolls back). Then find why ` +
      `${row.application_name ? `"${row.application_name}"` : 'the application'} leaves a transaction open (a missing ` +
      `commit, or a connection taken from the pool and not released), and set ` +
      `alter role ${role} set idle_in_transaction_session_timeout = '5min'; so the next one ends on its own.`
    );
  }
  return (
    `Cancel its statement: select pg_cancel_backend(${pid}); or, if the transaction stays open, end the ` +
    `session: select pg_terminate_backend(${pid}); (its transaction rolls back). A statement_timeout for role ` +
    `${role} stops the next one.`
  );
}

async function checkSlots(ctx: Context): Promise<void> {
  const { t } = ctx;
  const rows = await ctx.query<q.ReplicationSlotRow>(q.replicationSlots());
  if (rows.length === 0) {
    push(ctx, {
      check: 'replication-slots',
      subject: null,
      severity: 'ok',
      summary: 'No replication slot.',
      action: null,
      figures: { slots: 0 },
    });
    return;
  }
  for (const slot of rows) {
    const xidAge = Math.max(slot.xmin_age ?? 0, slot.catalog_xmin_age ?? 0);
    const severity = worstSeverity([
      slot.active ? 'ok' : 'warn',
      level(slot.xmin_age ?? slot.catalog_xmin_age, t.xidAge),
      level(slot.retained_wal_bytes, t.slotWalBytes),
    ]);
    const holds = [
      slot.xmin_age !== null
        ? `holds the vacuum horizon of every table ${count(slot.xmin_age)} transactions back`
        : null,
      slot.catalog_xmin_age !== null
        ? `holds the system catalogs' horizon ${count(slot.catalog_xmin_age)} transactions back`
        : null,
      slot.retained_wal_bytes !== null ? `keeps ${bytes(slot.retained_wal_bytes)} of WAL on disk` : null,
    ].filter((part) => part !== null);
    const name = slot.slot_name.replace(/'/g, "''");
    push(ctx, {
      check: 'replication-slots',
      subject: slot.slot_name,
      severity,
      summary:
        `${slot.temporary ? 'Temporary ' : ''}${slot.slot_type} replication slot "${slot.slot_name}"` +
        `${slot.database ? ` (database ${slot.database})` : ''} is ${slot.active ? `active (pid ${slot.active_pid})` : 'inactive'}` +
        (holds.length > 0 ? ` and ${holds.join(', ')}` : '') +
        '.',
      action:
        severity === 'ok'
          ? null
          : slot.active
            ? `Its consumer (pid ${slot.active_pid}) lags: look at the standby or subscriber that uses slot ` +
              `"${slot.slot_name}" (replay lag in pg_stat_replication, long queries on a standby with ` +
              `hot_standby_feedback).`
            : `If no standby or subscriber will use it again, drop it: select pg_drop_replication_slot('${name}'); ` +
              `otherwise bring its consumer back. Until then it keeps WAL${xidAge > 0 ? ' and the horizon' : ''} ` +
              `for as long as it exists (max_slot_wal_keep_size caps the WAL).`,
      figures: {
        slot: slot.slot_name,
        type: slot.slot_type,
        active: slot.active,
        activePid: slot.active_pid,
        xminAge: slot.xmin_age,
        catalogXminAge: slot.catalog_xmin_age,
        retainedWalBytes: slot.retained_wal_bytes,
        walStatus: slot.wal_status,
      },
    });
  }
}

async function checkPrepared(ctx: Context): Promise<void> {
  const { t } = ctx;
  const rows = await ctx.query<q.PreparedTransactionRow>(q.preparedTransactions());
  let listed = 0;
  for (const row of rows) {
    const severity = worstSeverity([level(row.seconds, t.transactionSeconds), level(row.xid_age, t.xidAge)]);
    if (severity === 'ok') continue;
    listed++;
    const gid = row.gid.replace(/'/g, "''");
    push(ctx, {
      check: 'prepared-transactions',
      subject: row.gid,
      severity,
      summary:
        `Transaction "${row.gid}" (owner ${row.owner}, database ${row.database}) was prepared for two-phase ` +
        `commit ${duration(row.seconds)} ago and is still neither committed nor rolled back; it holds the vacuum ` +
        `horizon ${count(row.xid_age)} transactions back and keeps its locks.`,
      action:
        `Its transaction manager should settle it. If that manager is gone, connect to database ${row.database} ` +
        `and run commit prepared '${gid}'; or rollback prepared '${gid}'; (whichever the other participants did).`,
      figures: { gid: row.gid, owner: row.owner, database: row.database, seconds: round(row.seconds) },
    });
  }
  if (listed === 0)
    push(ctx, {
      check: 'prepared-transactions',
      subject: null,
      severity: 'ok',
      summary:
        rows.length === 0
          ? 'No prepared transaction.'
          : `${rows.length} prepared transaction(s), the oldest ${duration(rows[0]!.seconds)} old.`,
      action: null,
      figures: { prepared: rows.length },
    });
}

async function checkTables(ctx: Context): Promise<void> {
  const { t, n } = ctx;
  const rows = await ctx.query<q.OutboxTableRow>(q.outboxTables(n, OUTBOX_TABLES));
  ctx.deadRows = rows.reduce((sum, r) => sum + (r.dead_rows ?? 0), 0);
  for (const row of rows) {
    const bloat = row.bloat_bytes !== null && row.heap_bytes > 0 ? row.bloat_bytes / row.heap_bytes : null;
    const bloatLevel =
      row.bloat_bytes !== null && row.bloat_bytes >= t.bloatMinBytes ? level(bloat, t.bloatRatio) : 'ok';
    const dead = row.dead_rows ?? 0;
    const deadRatio = dead > 0 ? dead / (dead + (row.live_rows ?? 0)) : 0;
    // with autovacuum off, nothing removes dead rows but a manual vacuum: a pile of them warns whatever its share
    const deadLevel =
      dead >= t.deadRowsMin
        ? worstSeverity([level(deadRatio, t.deadRowsRatio), row.autovacuum ? 'ok' : 'warn'])
        : 'ok';
    const table = `${n.schemaSql}.${row.table_name}`;
    const vacuumed =
      row.since_vacuum_seconds === null
        ? 'never vacuumed'
        : `last vacuumed ${duration(row.since_vacuum_seconds)} ago${row.last_autovacuum ? '' : ' (by hand; autovacuum never ran)'}`;
    const actions: string[] = [];
    if (deadLevel !== 'ok' && !row.autovacuum)
      actions.push(
        `Autovacuum does not visit this table (the server's autovacuum setting is off, or the table's ` +
          `autovacuum_enabled is false): turn it on (alter system set autovacuum = on; select pg_reload_conf(); ` +
          `or alter table ${table} reset (autovacuum_enabled);), or vacuum it on a schedule of your own.`,
      );
    if (deadLevel !== 'ok')
      actions.push(
        `Dead rows pile up: if a transaction or slot above holds the horizon, deal with it first (vacuum cannot ` +
          `remove them until then); otherwise run vacuum (verbose, analyze) ${table}; now, and let autovacuum ` +
          `visit it sooner: alter table ${table} set (autovacuum_vacuum_scale_factor = 0.01);`,
      );
    if (bloatLevel !== 'ok')
      actions.push(
        `The heap is larger than its rows need: vacuum makes the space reusable but does not return it. To shrink ` +
          `it without blocking the relay use pg_repack; vacuum full ${table}; also works but locks the table ` +
          `(stop the relays first).`,
      );
    push(ctx, {
      check: 'tables',
      subject: table,
      severity: worstSeverity([bloatLevel, deadLevel]),
      summary:
        `${table}: ${bytes(row.table_bytes + row.index_bytes)} (table ${bytes(row.table_bytes)}, indexes ` +
        `${bytes(row.index_bytes)}), ` +
        (bloat === null
          ? 'bloat unknown (no statistics yet)'
          : `≈ ${percent(bloat)} bloat (${bytes(row.bloat_bytes!)})`) +
        `, ${count(dead)} dead rows${dead > 0 ? ` (${percent(deadRatio)} of rows)` : ''}, ${vacuumed}` +
        `${row.autovacuum ? '' : ', autovacuum off'}.`,
      action: actions.length > 0 ? actions.join(' ') : null,
      figures: {
        tableBytes: row.table_bytes,
        indexBytes: row.index_bytes,
        bloatBytes: row.bloat_bytes,
        liveRows: row.live_rows,
        deadRows: row.dead_rows,
        lastAutovacuum: row.last_autovacuum?.toISOString() ?? null,
        lastVacuum: row.last_vacuum?.toISOString() ?? null,
        autovacuum: row.autovacuum,
      },
    });
  }
}

async function checkIndexes(ctx: Context): Promise<void> {
  const { t, n } = ctx;
  const rows = await ctx.query<q.OutboxIndexRow>(q.outboxIndexes(n, OUTBOX_TABLES));
  const found = new Map(rows.map((r) => [r.index_name, r]));
  let problems = 0;
  for (const index of OUTBOX_INDEXES) {
    const row = found.get(index.name);
    const recreate = recreateIndexSql(n.schemaSql, index);
    const qualified = `${n.schemaSql}.${index.name}`;
    if (!row) {
      problems++;
      push(ctx, {
        check: 'indexes',
        subject: qualified,
        severity: 'critical',
        summary:
          `Index ${qualified} on ${n.schemaSql}.${index.table} is missing` +
          (index.constraint
            ? ` (it backs the constraint ${index.constraint}).`
            : ': the relay reads without it.'),
        action: `Recreate it: ${recreate};`,
        figures: { table: index.table, present: false },
      });
    } else if (!row.valid) {
      problems++;
      push(ctx, {
        check: 'indexes',
        subject: qualified,
        severity: 'critical',
        summary:
          `Index ${qualified} is invalid (a create index concurrently or reindex concurrently failed, or is ` +
          `running${row.ready ? '' : ' and not ready yet'}): the planner never uses it, and writes still pay for it.`,
        action:
          `If no create index or reindex is running on it now (pg_stat_progress_create_index), rebuild it: ` +
          `drop index concurrently ${qualified}; then ${recreate};` +
          ` (a failure on a unique index means duplicate rows: find them before rebuilding).`,
        figures: { table: index.table, present: true, valid: false, ready: row.ready },
      });
    } else {
      const ratio = row.bloat_bytes !== null && row.bytes > 0 ? row.bloat_bytes / row.bytes : null;
      const severity =
        row.bloat_bytes !== null && row.bloat_bytes >= t.bloatMinBytes ? level(ratio, t.bloatRatio) : 'ok';
      if (severity === 'ok') continue;
      problems++;
      push(ctx, {
        check: 'indexes',
        subject: qualified,
        severity,
        summary: `Index ${qualified} is ${bytes(row.bytes)}, ≈ ${percent(ratio!)} of it bloat (${bytes(row.bloat_bytes!)}).`,
        action: `Rebuild it without blocking writes: reindex index concurrently ${qualified};`,
        figures: { table: index.table, bytes: row.bytes, bloatBytes: row.bloat_bytes },
      });
    }
  }
  if (problems === 0)
    push(ctx, {
      check: 'indexes',
      subject: null,
      severity: 'ok',
      summary: `All ${OUTBOX_INDEXES.length} indexes the migrations create are there and valid.`,
      action: null,
      figures: { expected: OUTBOX_INDEXES.length },
    });
}

async function checkPending(ctx: Context, orphanAfterMs: number): Promise<void> {
  const [row] = await ctx.query<q.OldestPendingRow>(q.oldestPending(ctx.n, orphanAfterMs));
  const seconds = Math.max(0, row!.seconds);
  const severity = level(seconds, ctx.t.pendingSeconds);
  const oldest = row!.oldest;
  const what = oldest
    ? ` The oldest open delivery ${ctx.role.row_security ? 'this role can see ' : ''}is ${oldest.status}: event ${oldest.eventId} ` +
      `to consumer "${oldest.consumer}" of tenant ${oldest.tenantId}, ${oldest.attempts} attempt(s)` +
      (oldest.lastError ? `, last error: ${oldest.lastError}` : '') +
      '.'
    : '';
  push(ctx, {
    check: 'pending',
    subject: null,
    severity,
    summary:
      seconds === 0
        ? 'Nothing waits to be delivered.'
        : `The oldest work not done is ${duration(seconds)} old.${what}`,
    action:
      severity === 'ok'
        ? null
        : `Check that a relay runs and hosts ${oldest ? `consumer "${oldest.consumer}"` : 'the consumers'} (health ` +
          `check, logs: a failing handler logs a warning per retry). Failed deliveries wait for their next ` +
          `attempt; pending events not yet fanned out mean no relay claims them. The board's Failures page ` +
          `${oldest ? `for tenant ${oldest.tenantId} ` : ''}or OutboxAdminService.stats(tenantId) shows the backlog per consumer.`,
    figures: {
      oldestPendingSeconds: round(seconds),
      consumer: oldest?.consumer ?? null,
      tenantId: oldest?.tenantId ?? null,
      eventId: oldest?.eventId ?? null,
    },
  });
}

async function checkDead(ctx: Context): Promise<void> {
  const [row] = await ctx.query<q.DeadDeliveriesRow>(q.deadDeliveries(ctx.n, DEAD_COUNT_CAP));
  const dead = row!.dead;
  const severity = level(dead, ctx.t.deadDeliveries);
  const capped = dead >= DEAD_COUNT_CAP ? '+' : '';
  const byConsumer = row!.consumers.map((c) => `"${c.consumer}": ${count(c.dead)}`).join(', ');
  const seen = ctx.role.row_security
    ? ` (row-level security shows role ${ctx.role.user_name} one tenant's rows only: run the doctor as the tables' owner to count every tenant's)`
    : '';
  push(ctx, {
    check: 'dead-deliveries',
    subject: null,
    severity,
    summary:
      dead === 0
        ? `No dead delivery${seen}.`
        : `${count(dead)}${capped} dead ${dead === 1 ? 'delivery' : 'deliveries'} (${byConsumer})${seen}.`,
    action:
      dead === 0
        ? null
        : `They wait for an operator: the board's Failures page (or OutboxAdminService.failedEvents) shows each ` +
          `one's last error. Fix the cause, then replay them (replayFailed) or purge them (purgeFailed). A dead ` +
          `delivery to an ordered consumer holds back its aggregate's later events.`,
    figures: { dead, capped: capped !== '' },
  });
}

async function checkMigrations(ctx: Context, table: string): Promise<void> {
  const schema = ctx.n.schema;
  const expected = outboxMigrations.map((Migration) =>
    migrationNameInSchema(new Migration().name ?? Migration.name, schema),
  );
  const [found] = await ctx.query<{ table_sql: string | null; readable: boolean }>(
    q.findMigrationsTable(table),
  );
  if (!found?.table_sql) {
    push(ctx, {
      check: 'migrations',
      subject: table,
      severity: 'warn',
      summary: `No TypeORM migrations table "${table}" found, so the migrations applied cannot be checked.`,
      action:
        `If your DataSource sets migrationsTableName, give that name (--migrations-table). If you apply the ` +
        `outbox's SQL files with another tool (npx nestjs-pg-outbox sql), compare its record with the ` +
        `${expected.length} files instead; the indexes check above still tells whether the schema is complete.`,
      figures: { expected: expected.length, applied: null },
    });
    return;
  }
  if (!found.readable) {
    push(ctx, {
      check: 'migrations',
      subject: found.table_sql,
      severity: 'warn',
      summary: `Role ${ctx.role.user_name} may not read the migrations table ${found.table_sql}, so the migrations applied were not checked.`,
      action:
        `Grant it: grant select on ${found.table_sql} to ${ctx.role.user_name}; or run the doctor as the ` +
        `tables' owner. The indexes check still tells whether the schema is complete.`,
      figures: { expected: expected.length, applied: null },
    });
    return;
  }
  const rows = await ctx.query<{ name: string }>(q.appliedMigrations(found.table_sql));
  const applied = new Set(rows.map((r) => r.name));
  const missing = expected.filter((name) => !applied.has(name));
  const known = new Set(expected);
  const ours =
    schema === 'public' ? /^Outbox[A-Za-z]+\d{13}$/ : new RegExp(`^Outbox[A-Za-z]+_${schema}_\\d{13}$`);
  const unknown = rows.map((r) => r.name).filter((name) => ours.test(name) && !known.has(name));
  const severity: OutboxDoctorSeverity = missing.length > 0 ? 'critical' : unknown.length > 0 ? 'warn' : 'ok';
  const parts = [
    `${expected.length - missing.length} of the ${expected.length} outbox migrations of schema ${schema} are applied (table ${found.table_sql})`,
    missing.length > 0 ? `missing: ${missing.join(', ')}` : null,
    unknown.length > 0 ? `applied but unknown to this version of the library: ${unknown.join(', ')}` : null,
  ].filter((p) => p !== null);
  push(ctx, {
    check: 'migrations',
    subject: found.table_sql,
    severity,
    summary: `${parts.join('; ')}.`,
    action:
      missing.length > 0
        ? `Run the app's migrations (the DataSource's migrations include outboxMigrationsFor({ schema: '${schema}' })), ` +
          `e.g. npx typeorm migration:run -d <your data source>; or apply them as SQL: npx nestjs-pg-outbox sql` +
          `${schema === 'public' ? '' : ` --schema ${schema}`}. Until then the relay may fail on what they add.`
        : unknown.length > 0
          ? `A newer version of nestjs-pg-outbox migrated this database: run that version everywhere (an older ` +
            `relay may not know what its migrations changed).`
          : null,
    figures: {
      expected: expected.length,
      applied: expected.length - missing.length,
      missing: missing.join(','),
    },
  });
}

function round(value: number | null): number | null {
  return value === null ? null : Math.round(value * 10) / 10;
}

const integer = new Intl.NumberFormat('en-US');

function count(n: number): string {
  return integer.format(Math.round(n));
}

function percent(ratio: number): string {
  return `${Math.round(ratio * 100)} %`;
}

/** `1536` → `1.5 KiB`. */
export function bytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${Math.round(value)} bytes`;
  return `${value < 10 && !Number.isInteger(value) ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** `432` → `7 min 12 s`. */
export function duration(seconds: number | null): string {
  if (seconds === null) return 'an unknown time';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}
