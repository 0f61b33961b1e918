/** How bad a finding of the doctor is: nothing to do, look at it today, act now. */
export type OutboxDoctorSeverity = 'ok' | 'warn' | 'critical';

/** The doctor's checks (see docs/doctor.md for each). */
export type OutboxDoctorCheck =
  | 'transactions'
  | 'replication-slots'
  | 'prepared-transactions'
  | 'tables'
  | 'indexes'
  | 'pending'
  | 'dead-deliveries'
  | 'migrations';

/** One finding: what was checked, how bad it is, and what an on-call engineer can do about it. */
export interface OutboxDoctorFinding {
  readonly check: OutboxDoctorCheck;
  /** What the finding is about when the check has several (a table, a slot, a pid), else null. */
  readonly subject: string | null;
  readonly severity: OutboxDoctorSeverity;
  /** One sentence: what was found, with its figures. */
  readonly summary: string;
  /** What to do about it (null when nothing is to be done). */
  readonly action: string | null;
  /** The figures behind the summary, for machines (`--json`, the health details). */
  readonly figures: Readonly<Record<string, string | number | boolean | null>>;
}

/** Everything the doctor found, worst first. */
export interface OutboxDoctorReport {
  /** The worst severity among the findings. */
  readonly severity: OutboxDoctorSeverity;
  readonly checkedAt: Date;
  readonly database: string;
  /** The outbox's schema. */
  readonly schema: string;
  /** The role the checks ran as, and what it could not see (other roles' sessions, other tenants' rows). */
  readonly role: { name: string; seesAllSessions: boolean; rowSecurity: boolean };
  readonly findings: readonly OutboxDoctorFinding[];
}

/**
 * The doctor's thresholds: a finding is `warn` from the first figure and `critical` from the second. Every one
 * has a default (in brackets); see docs/doctor.md for why.
 */
export interface OutboxDoctorThresholds {
  /** A transaction (or prepared transaction) open this many seconds. [300, 1800] */
  transactionSeconds?: readonly [warn: number, critical: number];
  /** A snapshot, transaction id or slot holding the horizon back this many transactions (`age(xmin)`). [10 000 000, 100 000 000] */
  xidAge?: readonly [warn: number, critical: number];
  /** WAL kept for a replication slot, in bytes. An inactive slot warns whatever it keeps. [1 GiB, 10 GiB] */
  slotWalBytes?: readonly [warn: number, critical: number];
  /** The oldest work not done, in seconds. [300, 3600] */
  pendingSeconds?: readonly [warn: number, critical: number];
  /** Dead deliveries (waiting for a replay or a purge). [1, 1000] */
  deadDeliveries?: readonly [warn: number, critical: number];
  /** A table's or index's estimated bloat, as a fraction of its size; only above `bloatMinBytes`. [0.5, 0.8] */
  bloatRatio?: readonly [warn: number, critical: number];
  /** Bloat below this many bytes is never reported. [64 MiB] */
  bloatMinBytes?: number;
  /** Dead rows as a fraction of a table's rows; only above `deadRowsMin`. [0.2, 0.5] */
  deadRowsRatio?: readonly [warn: number, critical: number];
  /** Fewer dead rows than this are never reported. [10 000] */
  deadRowsMin?: number;
}
