/**
 * The doctor's statements (the maintenance/doctor-*.ts files read them and judge), by role: what holds the vacuum
 * horizon back in doctor-horizon.ts, the outbox tables' and indexes' storage in doctor-storage.ts, and here the
 * connecting role, the backlog, dead deliveries and the migrations applied. Read-only, each its own statement so
 * that one failing (a missing function, a table an old schema lacks) leaves the others standing. They read what
 * the connecting role may see: see `doctorRole`.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import {
  NO_PENDING_AGE_POSITIONS,
  oldestPendingAge,
  type OldestPendingAgeRow,
  type PendingAgePositions,
} from './pending-age';

/**
 * Who is asking, and what that hides: `pg_stat_activity` shows other roles' transactions (their `xact_start`,
 * `backend_xmin`, query) only to a superuser or a member of `pg_read_all_stats`; row-level security hides other
 * tenants' deliveries (and `pg_stats` of the outbox tables) from the app's roles.
 */
export function doctorRole(n: OutboxNames): SqlStatement {
  return {
    text: `select current_user as user_name, current_database() as database,
                  r.rolsuper or pg_has_role(current_user, 'pg_read_all_stats', 'usage') as sees_all_sessions,
                  coalesce(row_security_active(to_regclass($1)), false) as row_security
             from pg_roles r where r.rolname = current_user`,
    values: [n.deliveries],
  };
}

/**
 * The TypeORM migrations table `name` resolves to (as `to_regclass` prints it: quoted where needed, qualified when
 * off the search path), or null when there is none; and whether this role may read it.
 */
export function findMigrationsTable(name: string): SqlStatement {
  return {
    text: `select to_regclass($1)::text as table_sql,
                  coalesce(has_table_privilege(to_regclass($1), 'select'), false) as readable`,
    values: [name],
  };
}

/** A TypeORM migrations table's text as `to_regclass` prints it: `migrations`, `app."Migrations"`, … */
const REGCLASS_TEXT = /^(?:(?:[a-z_][a-z0-9_$]*|"(?:[^"]|"")+")\.)?(?:[a-z_][a-z0-9_$]*|"(?:[^"]|"")+")$/;

/**
 * The names recorded in the migrations table found by `findMigrationsTable` (its text is PostgreSQL's own quoting
 * of an existing table: it is checked again here before it is spliced, since an identifier cannot be a parameter).
 */
export function appliedMigrations(tableSql: string): SqlStatement {
  if (!REGCLASS_TEXT.test(tableSql)) throw new Error(`not a table name as PostgreSQL prints it: ${tableSql}`);
  return { text: `select name from ${tableSql} order by id`, values: [] };
}

/**
 * The backlog, as `oldestPending` reads it: `seconds`, the age of the oldest work not done across tenants (pending
 * events, pending or failed deliveries), and the positions for the next reading (see `PendingAgeReadings`).
 */
export interface OldestPendingRow extends OldestPendingAgeRow {
  /** The oldest pending or failed delivery this role can see, or null. */
  oldest: {
    consumer: string;
    tenantId: string;
    eventId: string;
    status: string;
    attempts: number;
    createdAt: string;
    lastError: string | null;
  } | null;
}

/**
 * The oldest work not done, through the migrations' SECURITY DEFINER function (every tenant, whatever row-level
 * security hides from this role; consumers orphaned for `orphanAfterMs` left out; from the positions `from`, see
 * `oldestPendingAge`), and the oldest pending or failed delivery this role can see, with its consumer and tenant.
 * The second reads every open delivery through `outbox_deliveries_due_idx`: fine for a check, bounded by the backlog.
 */
export function oldestPending(
  n: OutboxNames,
  orphanAfterMs: number,
  from: PendingAgePositions = NO_PENDING_AGE_POSITIONS,
): SqlStatement {
  const age = oldestPendingAge(n, orphanAfterMs, from);
  return {
    text: `select a.*,
                  (select json_build_object('consumer', d.consumer_name, 'tenantId', d.tenant_id, 'eventId', d.event_id,
                                            'status', d.status, 'attempts', d.attempt_count, 'createdAt', d.created_at,
                                            'lastError', left(d.last_error, 200))
                     from ${n.deliveries} d
                    where d.status in ('pending', 'failed')
                    order by d.created_at limit 1) as oldest
             from (${age.text}) a`,
    values: age.values,
  };
}

/** Dead deliveries, as `deadDeliveries` reads them. */
export interface DeadDeliveriesRow {
  /** Dead deliveries this role can see, counted up to the cap. */
  dead: number;
  /** The consumers with the most of them (among the first `cap`), most first. */
  consumers: { consumer: string; dead: number }[];
}

/** Counts dead deliveries up to `cap` (through `outbox_deliveries_dead_idx`), and the consumers they belong to. */
export function deadDeliveries(n: OutboxNames, cap: number): SqlStatement {
  return {
    text: `with d as (select consumer_name from ${n.deliveries} where status = 'dead' limit $1::int)
           select (select count(*) from d)::int as dead,
                  coalesce((select json_agg(json_build_object('consumer', c.consumer_name, 'dead', c.n) order by c.n desc, c.consumer_name)
                              from (select consumer_name, count(*)::int as n from d group by consumer_name
                                     order by n desc, consumer_name limit 5) c), '[]'::json) as consumers`,
    values: [cap],
  };
}
