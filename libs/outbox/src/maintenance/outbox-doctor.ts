/**
 * The doctor: reads what holds the vacuum horizon back, the outbox tables' size, bloat and vacuum state, the
 * indexes, the backlog, dead deliveries and the migrations applied, and says for each how bad it is and what to
 * do. One place for the checks' logic, behind a query function: `npx nestjs-pg-outbox doctor` gives it a pg
 * client, `OutboxAdminService.doctor()` (the health indicator, the board) the app's DataSource. The statements are
 * in `store/sql/doctor.ts`. Decisions: docs/adr/1010-a-doctor-in-one-place.md.
 */
import { errorText } from '../errors/error-text';
import { OUTBOX_DEFAULTS } from '../options/outbox-options';
import type {
  OutboxDoctorCheck,
  OutboxDoctorReport,
  OutboxDoctorThresholds,
} from '../model/outbox-doctor-report.interface';
import type { OutboxNames } from '../model/table-names';
import * as q from '../store/sql/doctor';
import { PendingAgeReadings } from '../store/pending-age-readings';
import { type DoctorContext, type DoctorQuery, SEVERITY_RANK, worstSeverity } from './doctor-context';
import { checkDead, checkPending } from './doctor-backlog';
import { checkPrepared, checkSlots, checkTransactions } from './doctor-horizon';
import { checkMigrations } from './doctor-migrations';
import { checkIndexes, checkTables } from './doctor-storage';

export type { DoctorQuery } from './doctor-context';

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
  /** The caller's positions for the backlog's reading, kept across its runs (`PendingAgeReadings`). Default: none. */
  pendingAge?: PendingAgeReadings;
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
  const ctx: DoctorContext = {
    query,
    n,
    t,
    role: role!,
    findings: [],
    deadRows: null,
    pendingAge: options.pendingAge ?? new PendingAgeReadings(),
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
    (a, b) =>
      SEVERITY_RANK[b.severity] - SEVERITY_RANK[a.severity] ||
      order.indexOf(a.check) - order.indexOf(b.check),
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

async function check(ctx: DoctorContext, name: OutboxDoctorCheck, run: () => Promise<void>): Promise<void> {
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
