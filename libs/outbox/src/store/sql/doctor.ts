/**
 * The doctor's statements (`maintenance/outbox-doctor.ts` reads them and judges): what holds the vacuum horizon
 * back, the outbox tables' and indexes' size, estimated bloat and vacuum state, the backlog, dead deliveries and
 * the migrations applied. Read-only, each its own statement so that one failing (a missing function, a table an
 * old schema lacks) leaves the others standing. They read what the connecting role may see: see `doctorRole`.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

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

/** A session of this database (or a WAL sender) whose transaction is open, as `horizonSessions` reads it. */
export interface HorizonSessionRow {
  pid: number;
  user_name: string | null;
  application_name: string | null;
  client_addr: string | null;
  state: string | null;
  backend_type: string | null;
  /** Seconds since its transaction began (null when the role may not see it). */
  xact_seconds: number | null;
  /** Seconds since its state last changed (how long it has been idle in the transaction, say). */
  state_seconds: number | null;
  /** `age(backend_xmin)`: transactions since the snapshot it holds began; null without a snapshot. */
  xmin_age: number | null;
  /** `age(backend_xid)`: transactions since it took its own id (it wrote something). */
  xid_age: number | null;
  query: string | null;
}

/**
 * The sessions whose snapshot or transaction id keeps vacuum from removing dead rows (`backend_xmin`,
 * `backend_xid`), and any transaction open longer than `openSeconds` even without one (it holds its locks),
 * oldest horizon first. Only this database's sessions and WAL senders count: PostgreSQL's horizon for a table
 * ignores other databases' sessions. The doctor's own session is left out.
 */
export function horizonSessions(openSeconds: number, limit: number): SqlStatement {
  return {
    text: `select a.pid, a.usename as user_name, a.application_name, host(a.client_addr) as client_addr, a.state,
                  a.backend_type,
                  extract(epoch from now() - a.xact_start)::float8 as xact_seconds,
                  extract(epoch from now() - a.state_change)::float8 as state_seconds,
                  age(a.backend_xmin) as xmin_age, age(a.backend_xid) as xid_age,
                  left(a.query, 200) as query
             from pg_stat_activity a
            where a.pid <> pg_backend_pid()
              and (a.datid is null or a.datname = current_database())
              and (a.backend_xmin is not null or a.backend_xid is not null
                   or a.xact_start < now() - $1::float8 * interval '1 second')
            order by greatest(age(a.backend_xmin), age(a.backend_xid)) desc nulls last, a.xact_start nulls last
            limit $2::int`,
    values: [openSeconds, limit],
  };
}

/** A replication slot, as `replicationSlots` reads it. */
export interface ReplicationSlotRow {
  slot_name: string;
  slot_type: string;
  database: string | null;
  active: boolean;
  active_pid: number | null;
  temporary: boolean;
  /** `age(xmin)`: how far the slot holds back the horizon of every table (a standby with hot_standby_feedback). */
  xmin_age: number | null;
  /** `age(catalog_xmin)`: how far a logical slot holds back the system catalogs' horizon. */
  catalog_xmin_age: number | null;
  /** WAL kept on disk for the slot, from its `restart_lsn` to the current position. */
  retained_wal_bytes: number | null;
  wal_status: string | null;
}

/** Every replication slot of the cluster (physical slots belong to no database; each holds WAL back for all). */
export function replicationSlots(): SqlStatement {
  return {
    text: `select slot_name::text, slot_type, database::text, active, active_pid, temporary,
                  age(xmin) as xmin_age, age(catalog_xmin) as catalog_xmin_age,
                  pg_wal_lsn_diff(case when pg_is_in_recovery() then pg_last_wal_receive_lsn()
                                       else pg_current_wal_lsn() end, restart_lsn)::float8 as retained_wal_bytes,
                  wal_status
             from pg_replication_slots
            order by slot_name`,
    values: [],
  };
}

/** A prepared (two-phase) transaction, as `preparedTransactions` reads it. */
export interface PreparedTransactionRow {
  gid: string;
  owner: string;
  database: string;
  seconds: number;
  xid_age: number;
}

/** Transactions prepared for two-phase commit and not yet committed or rolled back: each holds the horizon. */
export function preparedTransactions(): SqlStatement {
  return {
    text: `select gid, owner::text, database::text, extract(epoch from now() - prepared)::float8 as seconds,
                  age(transaction) as xid_age
             from pg_prepared_xacts
            order by prepared`,
    values: [],
  };
}

/**
 * The partitioned tables among `tables` (unqualified) in the outbox's schema, each with its leaf partitions
 * (unqualified: the maintenance makes them in the table's schema), in name order; none in today's layout.
 */
export interface OutboxPartitionsRow {
  table_name: string;
  partitions: string[];
}

/** The partitioned tables among `tables` and their leaf partitions (docs/partitioning.md). */
export function outboxPartitions(n: OutboxNames, tables: readonly string[]): SqlStatement {
  return {
    text: `select c.relname::text as table_name,
                  array(select pc.relname::text from pg_partition_tree(c.oid) p join pg_class pc on pc.oid = p.relid
                         where p.isleaf order by 1) as partitions
             from pg_class c join pg_namespace ns on ns.oid = c.relnamespace
            where ns.nspname = $1 and c.relname = any($2::text[]) and c.relkind = 'p'
            order by c.relname`,
    values: [n.schema, tables],
  };
}

/**
 * The relations a statement below measures for a table or index `rel` of kind `kind`: itself, or the leaf
 * partitions of a partitioned one (PostgreSQL sizes a partitioned parent as 0 bytes and keeps no vacuum
 * statistics for it; each partition has its own). `pg_partition_tree` lists nothing for what is not partitioned.
 */
function leavesOf(rel: string, kind: string): string {
  return `(select ${rel} as oid where ${kind} not in ('p', 'I')
            union all select p.relid from pg_partition_tree(${rel}) p where p.isleaf and ${kind} in ('p', 'I'))`;
}

/** One outbox table's size, vacuum state and estimated bloat, as `outboxTables` reads it. */
export interface OutboxTableRow {
  table_name: string;
  /** The number of leaf partitions in the partitioned layout; null for a table that is not partitioned. */
  partitions: number | null;
  /** Heap, TOAST and free-space maps: `pg_table_size` (of every partition, summed). */
  table_bytes: number;
  /** Every index of the table: `pg_indexes_size` (of every partition, summed). */
  index_bytes: number;
  /** `pg_stat_user_tables`' estimates, summed over partitions (null when vacuum and analyze never looked). */
  live_rows: number | null;
  dead_rows: number | null;
  /**
   * The partition the vacuum figures below are of (the one with the most dead rows, then the largest), null for a
   * table that is not partitioned: vacuum and autovacuum work partition by partition.
   */
  worst_partition: string | null;
  last_autovacuum: Date | null;
  last_vacuum: Date | null;
  last_autoanalyze: Date | null;
  /** Seconds since the last vacuum, manual or automatic; null when never vacuumed. */
  since_vacuum_seconds: number | null;
  /** The heap's bytes beyond what its rows need (the estimate below, summed); null without statistics. */
  bloat_bytes: number | null;
  /** The heap's own bytes (main fork), against which `bloat_bytes` is measured. */
  heap_bytes: number;
  /** Whether autovacuum visits the table (the worst partition): on for the server and not switched off for it. */
  autovacuum: boolean;
}

/**
 * The outbox tables named in `tables` (unqualified) in the outbox's schema: size, dead rows, last (auto)vacuum,
 * and an estimate of the heap's bloat. A partitioned table's figures are its leaf partitions', summed; its vacuum
 * state is that of the partition with the most dead rows.
 *
 * The estimate is the usual one from the catalog (the check_postgres / "ioguix" family, simplified): the bytes
 * the rows need — `reltuples` × (23-byte tuple header rounded to 24, plus the average width of each column from
 * `pg_stats` weighted by its non-null fraction, rounded up to 8, plus a 4-byte line pointer) — spread over
 * `block_size − 24` per page at the table's fillfactor, against the pages the heap has (`relpages`). It needs
 * statistics (ANALYZE, which autovacuum runs): without them, or when row-level security hides `pg_stats` from
 * this role, it is null. It is an estimate, ±20 % on a healthy table; `pgstattuple` measures exactly.
 */
export function outboxTables(n: OutboxNames, tables: readonly string[]): SqlStatement {
  return {
    text: `with t as (
             select c.oid, c.relname, c.relkind
               from pg_class c join pg_namespace ns on ns.oid = c.relnamespace
              where ns.nspname = $1 and c.relname = any($2::text[]) and c.relkind in ('r', 'p')
           ), l as (
             select t.oid as table_oid, c.oid, c.relname, lns.nspname, c.reltuples, c.relpages,
                    coalesce((select split_part(o, '=', 2)::int from unnest(c.reloptions) o
                               where o like 'fillfactor=%'), 100) as fillfactor,
                    current_setting('autovacuum')::bool
                      and not coalesce('autovacuum_enabled=false' = any(c.reloptions), false) as autovacuum
               from t cross join lateral ${leavesOf('t.oid', 't.relkind')} leaf
               join pg_class c on c.oid = leaf.oid
               join pg_namespace lns on lns.oid = c.relnamespace
           ), w as (
             select l.oid, count(s.attname) as analysed,
                    24 + 4 + 8 * ceil(coalesce(sum(s.avg_width * (1 - s.null_frac)), 0) / 8.0) as row_bytes
               from l left join pg_stats s on s.schemaname = l.nspname
                                          and s.tablename = l.relname and not s.inherited
              group by l.oid
           ), m as (
             select l.table_oid, l.relname, l.autovacuum,
                    pg_table_size(l.oid)::float8 as table_bytes, pg_indexes_size(l.oid)::float8 as index_bytes,
                    s.n_live_tup::float8 as live_rows, s.n_dead_tup::float8 as dead_rows,
                    s.last_autovacuum, s.last_vacuum, s.last_autoanalyze,
                    (l.relpages::float8 * current_setting('block_size')::float8) as heap_bytes,
                    case when w.analysed = 0 or l.reltuples < 0 then null
                         else greatest(0, l.relpages - ceil(l.reltuples * w.row_bytes
                                                            / ((current_setting('block_size')::float8 - 24) * l.fillfactor / 100.0)))
                              * current_setting('block_size')::float8
                    end as bloat_bytes
               from l join w on w.oid = l.oid
               left join pg_stat_user_tables s on s.relid = l.oid
           ), worst as (
             select distinct on (m.table_oid) m.*
               from m order by m.table_oid, m.dead_rows desc nulls last, m.table_bytes desc, m.relname
           )
           select t.relname::text as table_name,
                  case when t.relkind = 'p' then (select count(*) from m where m.table_oid = t.oid)::int end as partitions,
                  coalesce(a.table_bytes, 0) as table_bytes, coalesce(a.index_bytes, 0) as index_bytes,
                  a.live_rows, a.dead_rows,
                  case when t.relkind = 'p' then worst.relname::text end as worst_partition,
                  worst.last_autovacuum, worst.last_vacuum, worst.last_autoanalyze,
                  extract(epoch from now() - greatest(worst.last_autovacuum, worst.last_vacuum))::float8 as since_vacuum_seconds,
                  coalesce(a.heap_bytes, 0) as heap_bytes, coalesce(worst.autovacuum, true) as autovacuum,
                  a.bloat_bytes
             from t
             left join (select table_oid, sum(table_bytes) as table_bytes, sum(index_bytes) as index_bytes,
                               sum(live_rows) as live_rows, sum(dead_rows) as dead_rows,
                               sum(heap_bytes) as heap_bytes, sum(bloat_bytes) as bloat_bytes
                          from m group by table_oid) a on a.table_oid = t.oid
             left join worst on worst.table_oid = t.oid
            order by t.relname`,
    values: [n.schema, tables],
  };
}

/** One index of an outbox table, as `outboxIndexes` reads it. */
export interface OutboxIndexRow {
  index_name: string;
  table_name: string;
  /** Whether its table is partitioned (the index is then a partitioned index, with one index per partition). */
  partitioned: boolean;
  /**
   * `pg_index.indisvalid`: false after a failed `create index concurrently` (the planner never uses it); for a
   * partitioned index, false until every partition has a valid index attached to it.
   */
  valid: boolean;
  /** `pg_index.indisready`: false while (or after a failure while) it is being built. */
  ready: boolean;
  /** Its size (its partitions' indexes, summed). */
  bytes: number;
  /** Bytes beyond what its entries need (estimate below, summed over partitions); null without statistics. */
  bloat_bytes: number | null;
  /** The leaf partitions of its table that have no index attached to it (always empty when not partitioned). */
  unindexed_partitions: string[];
  /** Its partitions' indexes that are attached to it but invalid (always empty when not partitioned). */
  invalid_partitions: string[];
  /**
   * Invalid indexes on its table's partitions that are attached to no index: what a cancelled or failed
   * `create index concurrently` on a partition leaves (always empty when not partitioned).
   */
  leftover_indexes: string[];
}

/**
 * Every index on the outbox tables named in `tables`, with its validity, size and estimated bloat; a partitioned
 * index with its partitions' indexes (attached, and whether each is valid) and the partitions that lack one.
 * The estimate, for B-trees: `reltuples` of the index × (8-byte index tuple header plus the key columns' average
 * widths from `pg_stats`, rounded up to 8, plus a 4-byte line pointer) over `block_size − 40` per page at 90 % fill
 * (the B-tree default), plus the meta page, against `relpages`. Null without statistics.
 */
export function outboxIndexes(n: OutboxNames, tables: readonly string[]): SqlStatement {
  return {
    text: `with i as (
             select ic.oid, ic.relkind, ic.relname as index_name, tc.oid as table_oid, tc.relname as table_name,
                    tc.relkind = 'p' as partitioned, x.indisvalid, x.indisready, am.amname
               from pg_index x
               join pg_class ic on ic.oid = x.indexrelid
               join pg_class tc on tc.oid = x.indrelid
               join pg_namespace ns on ns.oid = tc.relnamespace
               join pg_am am on am.oid = ic.relam
              where ns.nspname = $1 and tc.relname = any($2::text[])
           ), l as (
             select i.oid as index_oid, lc.oid, lc.relname, lx.indisvalid, lx.indrelid, lc.reltuples, lc.relpages,
                    lx.indnkeyatts,
                    (select count(s.attname) from unnest(lx.indkey) k
                       join pg_attribute a on a.attrelid = tc.oid and a.attnum = k
                       join pg_stats s on s.schemaname = tns.nspname and s.tablename = tc.relname
                                      and s.attname = a.attname and not s.inherited) as analysed,
                    (select 8 + 4 + 8 * ceil(coalesce(sum(s.avg_width), 0) / 8.0) from unnest(lx.indkey) k
                       join pg_attribute a on a.attrelid = tc.oid and a.attnum = k
                       join pg_stats s on s.schemaname = tns.nspname and s.tablename = tc.relname
                                      and s.attname = a.attname and not s.inherited) as entry_bytes
               from i cross join lateral ${leavesOf('i.oid', 'i.relkind')} leaf
               join pg_class lc on lc.oid = leaf.oid
               join pg_index lx on lx.indexrelid = lc.oid
               join pg_class tc on tc.oid = lx.indrelid
               join pg_namespace tns on tns.oid = tc.relnamespace
           )
           select i.index_name::text, i.table_name::text, i.partitioned, i.indisvalid as valid, i.indisready as ready,
                  coalesce((select sum(pg_relation_size(l.oid)) from l where l.index_oid = i.oid), 0)::float8 as bytes,
                  (select sum(case when i.amname <> 'btree' or l.analysed < l.indnkeyatts or l.reltuples < 0 then null
                                   else greatest(0, l.relpages - 1 - ceil(l.reltuples * l.entry_bytes
                                                                          / ((current_setting('block_size')::float8 - 40) * 0.9)))
                                        * current_setting('block_size')::float8 end)
                     from l where l.index_oid = i.oid)::float8 as bloat_bytes,
                  array(select pc.relname::text from pg_partition_tree(i.table_oid) p join pg_class pc on pc.oid = p.relid
                         where i.partitioned and p.isleaf
                           and not exists (select 1 from l where l.index_oid = i.oid and l.indrelid = p.relid)
                         order by 1) as unindexed_partitions,
                  array(select l.relname::text from l where l.index_oid = i.oid and l.oid <> i.oid and not l.indisvalid
                         order by 1) as invalid_partitions,
                  array(select lc.relname::text from pg_partition_tree(i.table_oid) p
                          join pg_index lx on lx.indrelid = p.relid and not lx.indisvalid
                          join pg_class lc on lc.oid = lx.indexrelid and not lc.relispartition
                         where i.partitioned and p.isleaf
                         order by 1) as leftover_indexes
             from i
            order by i.table_name, i.index_name`,
    values: [n.schema, tables],
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

/** The backlog, as `oldestPending` reads it. */
export interface OldestPendingRow {
  /** Age in seconds of the oldest work not done across tenants (pending events, pending or failed deliveries). */
  seconds: number;
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
 * security hides from this role; consumers orphaned for `orphanAfterMs` left out), and the oldest pending or
 * failed delivery this role can see, with its consumer and tenant. The second reads every open delivery through
 * `outbox_deliveries_due_idx`: fine for a check, bounded by the backlog.
 */
export function oldestPending(n: OutboxNames, orphanAfterMs: number): SqlStatement {
  return {
    text: `select ${n.oldestPendingAge}($1 * interval '1 millisecond') as seconds,
                  (select json_build_object('consumer', d.consumer_name, 'tenantId', d.tenant_id, 'eventId', d.event_id,
                                            'status', d.status, 'attempts', d.attempt_count, 'createdAt', d.created_at,
                                            'lastError', left(d.last_error, 200))
                     from ${n.deliveries} d
                    where d.status in ('pending', 'failed')
                    order by d.created_at limit 1) as oldest`,
    values: [orphanAfterMs],
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
