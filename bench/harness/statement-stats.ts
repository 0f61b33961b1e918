/**
 * Statements and their execution time per database, from pg_stat_statements: how many statements a system
 * sends per event, and which ones cost the server most. Needs the module preloaded (the bench loads it for
 * the peers scenario on its embedded server); on a server without it, every reading is null.
 *
 * Tracking is switched on for the bench database only, for sessions opened after {@link StatementStats.enable}:
 * the bench's admin connection (opened before) is never counted; a worker's probe connection opts out with
 * {@link untrackSession}, and the CPU probe's statements are left out by their text.
 */
import type { BenchDatabase } from './bench-database';

/** One statement's share of a measurement. */
export interface StatementCost {
  query: string;
  calls: number;
  execMs: number;
}

/** What ran in the bench database since the last reset. */
export interface StatementReading {
  calls: number;
  execMs: number;
  /** The costliest statements by execution time, most first. */
  top: StatementCost[];
}

/** Statement texts of the bench's own probes (CPU and settle checks), never counted. */
const PROBE_PATTERNS = ['%pg_stat_activity%', '%pg_stat_statements%'];

/**
 * Stops counting this session's statements (a probe's). A comment in the text would not do: pg_stat_statements
 * keeps the text without a leading comment. Ignored where the setting cannot be changed.
 */
export async function untrackSession(query: (text: string) => Promise<unknown>): Promise<void> {
  await query(`set pg_stat_statements.track = 'none'`).catch(() => undefined);
}

export class StatementStats {
  private constructor(
    private readonly db: BenchDatabase,
    readonly available: boolean,
    /** Why it is not available, when it is not. */
    readonly reason: string | null,
  ) {}

  /**
   * Turns tracking on for the bench database; unavailable (not an error) when the module is not loaded. `all`
   * also tracks the statements inside functions (the due-tenant scan's), listed beside the call that ran them.
   */
  static async enable(db: BenchDatabase, track: 'top' | 'all' = 'top'): Promise<StatementStats> {
    try {
      await db.sql('create extension if not exists pg_stat_statements');
      await db.sql(`alter database ${db.name} set pg_stat_statements.track = '${track}'`);
      await db.sql('select pg_stat_statements_reset()');
      return new StatementStats(db, true, null);
    } catch (error) {
      return new StatementStats(db, false, error instanceof Error ? error.message : String(error));
    }
  }

  async reset(): Promise<void> {
    if (this.available) await this.db.sql('select pg_stat_statements_reset()');
  }

  async read(topCount = 3): Promise<StatementReading | null> {
    if (!this.available) return null;
    const rows = await this.db.sql<{ query: string; calls: string; exec_ms: number }>(
      `select query, calls::text as calls, total_exec_time as exec_ms
         from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())
          and not (query like any($1::text[]))
        order by total_exec_time desc`,
      [PROBE_PATTERNS],
    );
    return {
      calls: rows.reduce((sum, r) => sum + Number(r.calls), 0),
      execMs: rows.reduce((sum, r) => sum + r.exec_ms, 0),
      top: rows
        .slice(0, topCount)
        .map((r) => ({ query: r.query, calls: Number(r.calls), execMs: r.exec_ms })),
    };
  }

  /** Switches tracking back off for the database (new sessions). */
  async disable(): Promise<void> {
    if (this.available) await this.db.sql(`alter database ${this.db.name} reset pg_stat_statements.track`);
  }
}
