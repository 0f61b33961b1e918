/** What every check of the doctor shares: its way to the database, what it knows so far, and its findings. */
import type {
  OutboxDoctorFinding,
  OutboxDoctorSeverity,
  OutboxDoctorThresholds,
} from '../model/outbox-doctor-report.interface';
import type { OutboxNames } from '../model/table-names';
import type { PendingAgeReadings } from '../store/pending-age-readings';
import type { SqlStatement } from '../store/sql/statement';

/** Runs one statement and returns its rows: the doctor's only way to the database. */
export type DoctorQuery = <T>(statement: SqlStatement) => Promise<T[]>;

/** One run of the doctor, as each check sees it. */
export interface DoctorContext {
  query: DoctorQuery;
  n: OutboxNames;
  t: Required<OutboxDoctorThresholds>;
  role: { user_name: string; sees_all_sessions: boolean; row_security: boolean };
  /** What the checks found so far; each check pushes its own. */
  findings: OutboxDoctorFinding[];
  /** Dead rows in the outbox tables, once the tables check has read them. */
  deadRows: number | null;
  /** Where the backlog's reading starts (the caller's, kept across its runs; else a first reading). */
  pendingAge: PendingAgeReadings;
}

export const SEVERITY_RANK: Record<OutboxDoctorSeverity, number> = { ok: 0, warn: 1, critical: 2 };

/** The worse of severities. */
export function worstSeverity(severities: readonly OutboxDoctorSeverity[]): OutboxDoctorSeverity {
  return severities.reduce<OutboxDoctorSeverity>(
    (a, b) => (SEVERITY_RANK[b] > SEVERITY_RANK[a] ? b : a),
    'ok',
  );
}

/** The severity of `value` against `[warn, critical]`. */
export function level(
  value: number | null,
  [warn, critical]: readonly [number, number],
): OutboxDoctorSeverity {
  if (value === null) return 'ok';
  if (value >= critical) return 'critical';
  return value >= warn ? 'warn' : 'ok';
}
