import type { Provider } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from './outbox.module-definition';
import type { ResolvedOutboxOptions } from './outbox-module-options.interface';

/**
 * The relay's performance mechanisms, one switch each, made once from the resolved options and read by the code
 * that applies each one. Each has its decision script in bench/decisions/ and its figure in its ADR:
 * - `lanes`: batches worked on at once, `relay.concurrency` (ADR 0802, relay/relay-lanes.ts);
 * - `claimGrowth`: claims grow up to `max` for quick batches that write nothing, or null: every claim takes
 *   `relay.batchSize` (ADR 0803, relay/claim-sizer.ts; `relay.maxBatchSize`);
 * - `leanClaim`: new events claimed by the lean statement where every consumer is in-process here (ADR 0804,
 *   store/sql/claim-new.ts and the tenant round's choice);
 * - `namedStatements`: the relay's statements with a prepared form run named, with generic plans, renamed on a
 *   schedule (ADR 0502, store/prepared-statements.ts; `preparedStatements`);
 * - `unguardedClosings`: a batch whose handlers never asked for `context.manager` commits without the guard
 *   (ADR 0806, the batch's closing in store/pg-relay-store.ts);
 * - `optimisticBatches`: a batch's handlers run without a savepoint each, and the batch's context and bounds are
 *   sent once, not per handler; a handler that fails after writing rolls the batch back, and it runs again with a
 *   savepoint per handler, the failed delivery settled as it failed (ADR 1001, batch/local-batch.ts and
 *   batch/handler-scope.ts);
 * - `wakeUpGapMs`: the shortest gap between two wake-up NOTIFYs of this process, in ms (0: one per commit;
 *   ADR 0606, enqueue/notify-pacer.ts; an option, `relay.notifyGapMs`, before 0.2.0);
 * - `oneWrite`: the statements of one round trip leave in one socket write, TypeORM's own included (ADR 1005,
 *   store/pipeline.ts and `sendSteps`);
 * - `leanTransactions`: the batch transaction in which in-process handlers run begins and commits by the relay's
 *   own `begin` and `commit` in its round trips, not TypeORM's `startTransaction()` and `commitTransaction()`,
 *   where no subscriber listens to a transaction's start or to a commit before it happens (TypeORM's runner shows
 *   the transaction as its own calls would; `afterTransactionCommit` subscribers hear of the commit; ADR 1201,
 *   store/round-connection.ts);
 * - `pacedScans`: a round that wake-ups alone brought (no tenant's last batch came back full) scans for due tenants
 *   once the last complete scan is `relay.pollIntervalMs` old, not 100 ms: retries due and tenants whose wake-up
 *   was lost are found within a poll interval, as between rounds; a round with a backlog scans every 100 ms
 *   (ADR 1201's addendum of 2026-12-06, relay/due-tenant-planner.ts).
 * - `fairShares`: while other tenants are due, a backlogged tenant's claims and lanes are its weighted share, and
 *   a round visits the other tenants first (ADR 1106, relay/tenant-shares.ts; `relay.tenantWeights`).
 * - `claimPositions`: claims of new events scan from a per-tenant position in `seq` order, past the settled
 *   events whose index entries a held snapshot keeps (a safety-net scan every `fullScanMs` from where the position
 *   stood at the previous one, from the start every `startScanMs`), and so does the scan for
 *   due tenants (`outbox_due_tenants`' six-argument form), or null: every claim scans from the tenant's first
 *   pending entry, the due-tenant scan from each tenant's start (ADR 1206, store/claim-positions.ts, the claims'
 *   `fresh` scan and store/sql/due-tenants.ts).
 * - `claimFloor`: in the partitioned layout, the claims look only at events from the oldest range with unsettled
 *   work (at most `marginMs` before now), a bound read every `refreshMs` from the ranges holding open work on (every
 *   range each `fullScanMs`), each tenant's claims without it every `fullScanMs`; or null: no bound (ADR 1207's
 *   addenda, store/claim-floor.ts).
 * - `horizonVacuums`: before each vacuum of the lease table, the relay reads the vacuum horizon (the oldest
 *   snapshot or transaction id of the database's sessions, replication slots and prepared transactions); while it
 *   has not moved since the previous vacuum, which removed all that it allowed, the vacuum is skipped, and runs
 *   at most every `heldEveryMs`; or null: a vacuum every `relay.vacuumLeasesEvery` released leases, held or not
 *   (ADR 0601's addendum, maintenance/lease-vacuum.ts).
 * - `leaseProbesByKey`: the claims' transactions plan without sequential scans (`enable_seqscan` off, set with
 *   their context), so the claims' probe of each event's lease reads the lease table by its key whatever the
 *   table's size when the plan was made, not the whole table per event; and so does a narrowed batch's extension
 *   of its leases (ADR 0601's addendum of 2026-12-07, the last); or false: as PostgreSQL plans it (ADR 0804's
 *   addendum on the lease probe, store/sql/transaction-context.ts and the claims' context in the store).
 * Pipelining (ADR 0501/0604) and the narrowing of a failed batch (ADR 0101) are not switches: the relay's
 * round trips and its guarantees rest on them.
 */
export interface RelayPolicy {
  readonly lanes: number | 'auto';
  readonly claimGrowth: { readonly max: number } | null;
  readonly leanClaim: boolean;
  readonly namedStatements: boolean;
  readonly unguardedClosings: boolean;
  readonly optimisticBatches: boolean;
  readonly wakeUpGapMs: number;
  readonly oneWrite: boolean;
  readonly leanTransactions: boolean;
  readonly pacedScans: boolean;
  readonly fairShares: boolean;
  readonly claimPositions: {
    readonly fullScanMs: number;
    readonly settleMs: number;
    /** How often a tenant's claims scan from its start (default: `fullScanMs`, every safety net from 0). */
    readonly startScanMs?: number;
  } | null;
  readonly claimFloor: {
    readonly marginMs: number;
    readonly refreshMs: number;
    readonly fullScanMs: number;
  } | null;
  readonly horizonVacuums: { readonly heldEveryMs: number } | null;
  readonly leaseProbesByKey: boolean;
}

/** Token of the app's `RelayPolicy` (internal: not exported by the package's index). */
export const OUTBOX_RELAY_POLICY = Symbol('OUTBOX_RELAY_POLICY');

/**
 * Token of switches that override the policy made from the options: not an option of the module, but what the
 * decision scripts and the benchmark provide (from a global module of their app) to measure a mechanism against
 * its absence. A string, so that a copy of the library built elsewhere (the benchmark's) finds it too. Each app
 * has its own: two apps in one process never see each other's.
 */
export const OUTBOX_RELAY_POLICY_SWITCHES = 'nestjs-pg-outbox:relay-policy-switches';

/**
 * How often each tenant's claim scans from where its position stood at the previous such scan, how long a
 * claim's reading waits, and how often it scans from its first pending entry (ADR 1206 and its addendum on the
 * 10-minute hold).
 */
const CLAIM_POSITIONS = { fullScanMs: 60_000, settleMs: 250, startScanMs: 600_000 };

/** The claims' floor in the partitioned layout: its margin, how often it is read, each tenant's full scan (ADR 1207). */
const CLAIM_FLOOR = { marginMs: 600_000, refreshMs: 5_000, fullScanMs: 60_000 };

/** How often the lease table is vacuumed at most while the vacuum horizon does not move (ADR 0601's addendum). */
const HORIZON_VACUUMS = { heldEveryMs: 60_000 };

/** The wake-up pacer's gap as shipped, in ms (ADR 0606). */
const WAKE_UP_GAP_MS = 2;

/** The policy the options give, with `switches` over it. */
export function relayPolicy(
  options: Pick<ResolvedOutboxOptions, 'relay' | 'preparedStatements'>,
  switches: Partial<RelayPolicy> = {},
): RelayPolicy {
  const { batchSize, maxBatchSize, concurrency } = options.relay;
  return {
    lanes: concurrency,
    claimGrowth: maxBatchSize > batchSize ? { max: maxBatchSize } : null,
    leanClaim: true,
    namedStatements: options.preparedStatements,
    unguardedClosings: true,
    optimisticBatches: true,
    wakeUpGapMs: WAKE_UP_GAP_MS,
    oneWrite: true,
    leanTransactions: true,
    pacedScans: true,
    fairShares: true,
    claimPositions: CLAIM_POSITIONS,
    claimFloor: CLAIM_FLOOR,
    horizonVacuums: HORIZON_VACUUMS,
    leaseProbesByKey: true,
    ...switches,
  };
}

/** Makes the policy once, from the resolved options and the switches an app may provide. */
export const relayPolicyProvider: Provider = {
  provide: OUTBOX_RELAY_POLICY,
  useFactory: (options: ResolvedOutboxOptions, switches: Partial<RelayPolicy> | undefined): RelayPolicy =>
    relayPolicy(options, switches ?? {}),
  inject: [OUTBOX_RESOLVED_OPTIONS, { token: OUTBOX_RELAY_POLICY_SWITCHES, optional: true }],
};
