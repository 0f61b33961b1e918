import { DEFAULT_DOCTOR_THRESHOLDS, examineOutbox, thresholdProblems } from '../maintenance/outbox-doctor';
import type {
  OutboxDoctorReport,
  OutboxDoctorSeverity,
  OutboxDoctorThresholds,
} from '../model/outbox-doctor-report.interface';
import { outboxNames, schemaProblem } from '../model/table-names';
import { openDoctorConnection } from '../store/doctor-connection';

/** `doctor`'s part of the usage text. */
export const DOCTOR_USAGE = `  doctor            check the outbox's database: what holds the vacuum horizon back (long transactions,
                    replication slots, prepared transactions), the outbox tables' size, bloat, dead rows
                    and last autovacuum, missing or invalid indexes, the backlog, dead deliveries and the
                    migrations applied, each with what to do (see docs/doctor.md)
  --url <url>       the database (default: $DATABASE_URL)
  --schema <name>   the outbox's schema (default: public)
  --migrations-table <name>
                    TypeORM's migrations table, as the DataSource's migrationsTableName (default: migrations)
  --orphan-after-ms <n>
                    as registry.orphanAfterMs: consumers unseen this long are left out of the backlog
                    (default: 3600000)
  --set <threshold>=<warn>,<critical>
                    change a threshold (repeatable), e.g. --set transactionSeconds=60,600; one number for
                    bloatMinBytes and deadRowsMin. Known: ${Object.keys(DEFAULT_DOCTOR_THRESHOLDS).join(', ')}
  --json            print the report as JSON
  Exit code: 0 all ok, 1 a warning, 2 something critical, 3 the checks could not run (bad option, no connection).
`;

/** Exit codes of `doctor`, as monitoring plugins use them (Nagios: OK, WARNING, CRITICAL, UNKNOWN). */
const EXIT: Record<OutboxDoctorSeverity, number> = { ok: 0, warn: 1, critical: 2 };
/** The exit code when the checks could not run. */
export const DOCTOR_UNKNOWN = 3;

interface DoctorFlags {
  url: string;
  schema: string;
  migrationsTable: string;
  orphanAfterMs?: number;
  thresholds: OutboxDoctorThresholds;
  json: boolean;
}

function parse(flags: readonly string[], env: NodeJS.ProcessEnv): DoctorFlags | { problem: string } {
  let url = env.DATABASE_URL;
  let schema = 'public';
  let migrationsTable = 'migrations';
  let orphanAfterMs: number | undefined;
  let json = false;
  const thresholds: Record<string, unknown> = {};
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i]!;
    if (flag === '--json') {
      json = true;
      continue;
    }
    const [name, inline] = flag.startsWith('--') && flag.includes('=') ? splitOnce(flag, '=') : [flag, null];
    if (!['--url', '--schema', '--migrations-table', '--orphan-after-ms', '--set'].includes(name))
      return { problem: `unknown option "${flag}"` };
    const value = inline ?? flags[++i];
    if (value === undefined) return { problem: `${name} needs a value after it` };
    if (name === '--url') url = value;
    else if (name === '--schema') {
      const problem = schemaProblem(value);
      if (problem !== null) return { problem: `--schema must be ${problem}, got ${JSON.stringify(value)}` };
      schema = value;
    } else if (name === '--migrations-table') migrationsTable = value;
    else if (name === '--orphan-after-ms') {
      orphanAfterMs = Number(value);
      if (!Number.isInteger(orphanAfterMs) || orphanAfterMs < 0)
        return {
          problem: `--orphan-after-ms must be a whole number of milliseconds, got ${JSON.stringify(value)}`,
        };
    } else {
      const [key, figures] = splitOnce(value, '=');
      if (figures === null)
        return {
          problem: `--set takes <threshold>=<warn>,<critical>, e.g. transactionSeconds=60,600; got "${value}"`,
        };
      const numbers = figures.split(',').map(Number);
      thresholds[key] = numbers.length === 1 ? numbers[0] : numbers;
    }
  }
  const problems = thresholdProblems(thresholds);
  if (problems.length > 0) return { problem: problems.join('; ') };
  if (!url)
    return {
      problem: 'no database to check: pass --url postgres://user@host:5432/db or set DATABASE_URL',
    };
  return { url, schema, migrationsTable, orphanAfterMs, thresholds, json };
}

function splitOnce(text: string, separator: string): [string, string | null] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, null] : [text.slice(0, at), text.slice(at + 1)];
}

/** `npx nestjs-pg-outbox doctor`: runs the checks and prints the report; resolves to the exit code. */
export async function doctorCommand(
  flags: readonly string[],
  out: { stdout(text: string): void; stderr(text: string): void },
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const parsed = parse(flags, env);
  if ('problem' in parsed) {
    out.stderr(`nestjs-pg-outbox doctor: ${parsed.problem}\n\n${DOCTOR_USAGE}`);
    return DOCTOR_UNKNOWN;
  }
  let report: OutboxDoctorReport;
  try {
    const connection = await openDoctorConnection(parsed.url);
    try {
      report = await examineOutbox((statement) => connection.query(statement), {
        names: outboxNames(parsed.schema),
        orphanAfterMs: parsed.orphanAfterMs,
        migrationsTable: parsed.migrationsTable,
        thresholds: parsed.thresholds,
      });
    } finally {
      await connection.close().catch(() => undefined);
    }
  } catch (error) {
    out.stderr(
      `nestjs-pg-outbox doctor: could not check ${redacted(parsed.url)}: ` +
        `${error instanceof Error ? error.message : String(error)}\n`,
    );
    return DOCTOR_UNKNOWN;
  }
  out.stdout(parsed.json ? `${JSON.stringify(report, null, 2)}\n` : reportText(report));
  return EXIT[report.severity];
}

/** The URL without its password, for messages. */
export function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'the database';
  }
}

const LABEL: Record<OutboxDoctorSeverity, string> = { ok: 'OK', warn: 'WARN', critical: 'CRITICAL' };

/** The report as text for a terminal: a header, then each finding worst first, its action indented under it. */
export function reportText(report: OutboxDoctorReport): string {
  const role = report.role;
  const limits = [
    role.seesAllSessions ? null : 'sees only its own sessions',
    role.rowSecurity ? "sees one tenant's rows only (row-level security)" : null,
  ].filter((l) => l !== null);
  const lines = [
    `nestjs-pg-outbox doctor: ${LABEL[report.severity]} — database ${report.database}, schema ${report.schema}, ` +
      `as role ${role.name}${limits.length > 0 ? ` (${limits.join(', ')})` : ''}, ${report.checkedAt.toISOString()}`,
    '',
  ];
  for (const finding of report.findings) {
    lines.push(`${LABEL[finding.severity].padEnd(8)}  ${finding.check}: ${finding.summary}`);
    if (finding.action) lines.push(`          → ${finding.action}`);
  }
  return `${lines.join('\n')}\n`;
}
