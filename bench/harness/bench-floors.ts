/**
 * BENCH ONLY: the library's floors, lowered in the bench's throwaway database so that minutes of soak see what
 * hours of production would. Nothing here is an option of the library, and the library's code is unchanged: each
 * floor is a check in one of its SQL functions, which these rewrite in the bench database alone (and put back).
 *
 * - Retention refuses a cut-off less than an hour ago (`outbox_purge_settled`, `outbox_drop_partitions`): the soak
 *   asks for 2 hours, which passes the check, and the rewritten functions take `now() - <seconds>` instead.
 * - A range of the partitioned layout is an hour wide at least (`outbox_partition_prepare`; the CLI's `--width`
 *   takes hours or days): `--range-minutes=N` converts the bench database with ranges of N minutes, so that the
 *   relay makes ranges ahead, and retention drops them, several times in a 30-minute soak.
 */
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import type { BenchDatabase } from './bench-database';

/** The check that opens both retention functions: a cut-off less than an hour ago is refused. */
const RETENTION_FLOOR = /(older_than > now\(\) - interval '1 hour' then[\s\S]*?end if;)/;
const RETENTION_FUNCTIONS = [
  'public.outbox_purge_settled(timestamptz, integer)',
  'public.outbox_purge_settled(timestamptz, integer, uuid[], timestamptz[])',
  'public.outbox_drop_partitions(timestamptz)',
];
const PREPARE = 'public.outbox_partition_prepare(interval, integer, timestamptz)';
const WIDTH_FLOOR = "width < interval '1 hour'";
/** The width the conversion's statements are made with, then replaced: the only one the CLI's check and ours share. */
const WIDTH_ASKED = '1 hour';

/**
 * Retention in this database purges, and drops the ranges of, events settled `seconds` ago, whatever cut-off it is
 * given (the caller asks for one that passes the floor check). Returns what puts the functions back.
 */
export async function lowerRetentionFloor(db: BenchDatabase, seconds: number): Promise<() => Promise<void>> {
  const restores: Array<() => Promise<void>> = [];
  for (const fn of RETENTION_FUNCTIONS)
    restores.push(
      await rewriteFunction(
        db,
        fn,
        RETENTION_FLOOR,
        `$1\n        older_than := now() - make_interval(secs => ${Number(seconds)}); -- BENCH ONLY: bench/harness/bench-floors.ts`,
      ),
    );
  return async () => {
    for (const restore of restores) await restore();
  };
}

/**
 * Ranges made ahead for ranges of `minutes`: they must reach past the maintenance's margin of 5 minutes. When the
 * ranges made end less than 5 minutes ahead, `outbox_make_partitions` starts the next ones at the first boundary
 * past now + 5 minutes (the branch for a maintenance that fell behind), and events of the minutes in between go
 * to the default partition. So at least 6 minutes and a range ahead, and never fewer than the suites' 3.
 */
export function rangesAhead(minutes: number): number {
  return Math.max(3, Math.ceil(6 / minutes) + 1);
}

/**
 * Converts this database's (empty) outbox tables to the partitioned layout with ranges of `minutes` minutes from
 * the current minute, {@link rangesAhead} made ahead: the library's own conversion statements, with the width the
 * library refuses below an hour. The width's check is put back afterwards; the relay's maintenance reads the width
 * from `outbox_partitioning` and makes and drops ranges of it as it would of an hour or a day.
 */
export async function partitionInMinutes(db: BenchDatabase, minutes: number): Promise<void> {
  const ahead = rangesAhead(minutes);
  const restore = await rewriteFunction(db, PREPARE, WIDTH_FLOOR, "width < interval '1 minute'");
  try {
    const start = new Date(Math.floor(Date.now() / 60_000) * 60_000).toISOString();
    const prepare = `outbox_partition_prepare('${WIDTH_ASKED}'`;
    const statements = partitionedLayoutSql('public', { width: WIDTH_ASKED, ahead, start })
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.startsWith('--'));
    if (!statements.some((s) => s.includes(prepare)))
      throw new Error(
        `bench: the conversion no longer calls ${prepare}…); update partitionInMinutes in bench/harness/bench-floors.ts`,
      );
    for (const statement of statements)
      await db.sql(statement.replace(prepare, `outbox_partition_prepare('${minutes} minutes'`));
  } finally {
    await restore();
  }
}

/**
 * Replaces `from` by `to` in the definition of the function `signature` in this database; fails, naming this file,
 * when the definition no longer holds `from`. Returns what puts the function back.
 */
async function rewriteFunction(
  db: BenchDatabase,
  signature: string,
  from: string | RegExp,
  to: string,
): Promise<() => Promise<void>> {
  const [row] = await db.sql<{ definition: string }>(
    `select pg_get_functiondef($1::regprocedure) as definition`,
    [signature],
  );
  const original = row!.definition;
  const rewritten = original.replace(from, to);
  if (rewritten === original)
    throw new Error(
      `bench: ${signature} no longer holds ${String(from)}; update bench/harness/bench-floors.ts`,
    );
  await db.sql(rewritten);
  return async () => {
    await db.sql(original);
  };
}
