/**
 * The doctor's statements about what holds the vacuum horizon back: open transactions, replication slots,
 * prepared transactions (`maintenance/doctor-horizon.ts` judges them). Read-only, one statement each.
 */
import type { SqlStatement } from './statement';

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
