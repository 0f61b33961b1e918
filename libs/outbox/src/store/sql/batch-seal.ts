import type { OutboxNames } from '../../model/table-names';
import type { SqlStatement } from './statement';

/**
 * Seals a batch transaction in which handlers write (sent with the first handler's opening, no round trip of its
 * own): a row keyed by the lease token whose deferred constraint trigger fails any commit that comes before
 * `unsealBatch` — a handler's `COMMIT` sent on the batch's connection past `context.manager` — so the writes of
 * the handlers before it roll back with it, instead of landing without their outcomes and again when the batch
 * runs once more. See the migration `OutboxBatchSeal1764500700000`.
 */
export function sealBatch(n: OutboxNames, leaseToken: string): SqlStatement {
  return { text: `insert into ${n.batchSeals} (lease_token) values ($1::uuid)`, values: [leaseToken] };
}

/** Lifts the seal of `sealBatch` in the batch's closing round trip, just before the relay's own `COMMIT`. */
export function unsealBatch(n: OutboxNames, leaseToken: string): SqlStatement {
  return { text: `delete from ${n.batchSeals} where lease_token = $1::uuid`, values: [leaseToken] };
}

/** SQLSTATE of the seal's trigger: a commit that was not the relay's (see `sealBatch`). */
export const BATCH_SEAL_SQLSTATE = 'OB004';

/**
 * The transaction-local setting with which the relay's own check of every deferred constraint (`handlerChecks`)
 * tells the seal's trigger that this is not a commit.
 */
export const CHECKING_CONSTRAINTS = 'outbox.checking_constraints';
