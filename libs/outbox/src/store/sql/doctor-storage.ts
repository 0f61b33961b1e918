/**
 * The doctor's statements about the outbox tables' storage: their partitions (on the partitioned layout), size,
 * estimated bloat and vacuum state, and their indexes (`maintenance/doctor-storage.ts` judges them). Read-only,
 * one statement each.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

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
