/**
 * The doctor's checks of what holds the vacuum horizon back: open transactions (their snapshot or transaction id),
 * replication slots, prepared transactions. Each says whose it is and how to end it.
 */
import * as q from '../store/sql/doctor-horizon';
import { type DoctorContext, level, worstSeverity } from './doctor-context';
import { bytes, count, duration, round } from './doctor-format';

/** Sessions listed by the transactions check at most. */
const SESSIONS_LISTED = 5;

/** Sessions holding the horizon (or a transaction) longer than the thresholds: one finding each, else one ok finding. */
export async function checkTransactions(ctx: DoctorContext): Promise<void> {
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
    ctx.findings.push({
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
  ctx.findings.push({
    check: 'transactions',
    subject: null,
    severity: 'ok',
    summary:
      (oldest
        ? `No transaction holds the vacuum horizon back for long: the one furthest back, pid ${oldest.pid}, has been open ${duration(oldest.xact_seconds)}.`
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

/** Each replication slot: inactive, or holding WAL or the horizon beyond the thresholds. */
export async function checkSlots(ctx: DoctorContext): Promise<void> {
  const { t } = ctx;
  const rows = await ctx.query<q.ReplicationSlotRow>(q.replicationSlots());
  if (rows.length === 0) {
    ctx.findings.push({
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
    ctx.findings.push({
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

/** Prepared transactions older than the thresholds: one finding each, else one ok finding. */
export async function checkPrepared(ctx: DoctorContext): Promise<void> {
  const { t } = ctx;
  const rows = await ctx.query<q.PreparedTransactionRow>(q.preparedTransactions());
  let listed = 0;
  for (const row of rows) {
    const severity = worstSeverity([level(row.seconds, t.transactionSeconds), level(row.xid_age, t.xidAge)]);
    if (severity === 'ok') continue;
    listed++;
    const gid = row.gid.replace(/'/g, "''");
    ctx.findings.push({
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
    ctx.findings.push({
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
