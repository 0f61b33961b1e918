import type { QueryRunner } from 'typeorm';
import { fromFanOut, toClaimedDelivery, type ClaimedRow, type FanOutResult } from '../model/claimed-delivery';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { ClaimPositions } from './claim-positions';
import { NIL_UUID } from '../model/outbox.constants';
import { sendCancelRequest } from './cancel-request';
import { pgConnection } from './pipeline';
import type {
  BatchClosing,
  ClaimAnswer,
  ClaimRequest,
  HandlerChannel,
  TenantConnection,
} from './outbox-store.port';
import type { RoundConnection } from './round-connection';
// from their own modules, not through './sql''s `export *`: each name read there is a getter shared by all of
// them, a megamorphic load of the module's exports per read (about 5% of the library's own samples on a warm
// relay's round, issue 35)
import { batchGuard, resetSession, setTransactionContext } from './sql/transaction-context';
import { claimDueDeliveries } from './sql/claim-due';
import { newEventsStatement } from './sql/claim-new';
import { lockConsumerLimits, NO_TENANT_LIMITS, type TenantConsumerLimits } from './sql/consumer-limits';
import { sealBatch, unsealBatch } from './sql/batch-seal';
import { extendEventLeases } from './sql/leases';
import { recordOutcomes } from './sql/record-outcomes';
import type { SqlStatement } from './sql/statement';

/** The fan-out's result when it was not run (no new events). */
const NOTHING_FANNED_OUT: FanOutResult = { deliveries: [], leases: [], written: [], lost: 0 };

/** A tenant's visit on a `RoundConnection` (see `TenantConnection`), made by `PgRelayStore.connect`. */
export class PgTenantConnection implements TenantConnection {
  constructor(
    private readonly connection: RoundConnection,
    private readonly options: ResolvedOutboxOptions,
    private readonly tenantId: string,
    private readonly positions: ClaimPositions | null,
    private readonly floorOf: (tenantId: string, now: number) => string,
    /** Whether the claim's transaction plans without sequential scans (`RelayPolicy.leaseProbesByKey`). */
    private readonly byKey: boolean,
  ) {}

  get inTransaction(): boolean {
    return this.connection.inTransaction;
  }

  get released(): boolean {
    return this.connection.released;
  }

  get runner(): QueryRunner {
    return this.connection.runner;
  }

  async claim(request: ClaimRequest): Promise<ClaimAnswer> {
    const { names, relay, registry } = this.options;
    const { tenantId, leaseToken, limit, hosted, inProcess, limited, tenantConsumers, newEvents } = request;
    const { leaseMs } = relay;
    const liveWithinMs = registry.liveWithinMs;
    // a limited consumer's turn first, in a statement of its own (see lockConsumerLimits)
    const turn = request.due && limited.length > 0;
    const tenantLimits = tenantConsumerLimits(tenantConsumers);
    const sentAt = performance.now();
    const from = this.positions?.from(tenantId, sentAt) ?? '-1';
    // since when its recovery of fanned-out events looks at expired leases (by the same tiers as `from`)
    const leasesSince = this.positions?.leasesSince(tenantId, sentAt) ?? null;
    // a full scan of the positions is a full scan of the floor too: an event below the floor may be below the
    // position (ADR 1207's addendum)
    const bound = this.floorOf(tenantId, sentAt);
    const floor = from === '0' ? NIL_UUID : bound;
    const statements = [
      relayContext(this.options, tenantId, { durable: false, byKey: this.byKey }),
      // named fields, not `{ ...request, … }`: properties added to a spread's copy cost about 1 µs each in
      // Node 20's V8 (ADR 1201, addendum of 2026-12-07)
      newEventsStatement(names, {
        tenantId,
        leaseToken,
        limit,
        hosted,
        inProcess,
        tenantConsumers,
        newEvents,
        liveWithinMs,
        leaseMs,
        from,
        floor,
        leasesSince,
      }),
      turn ? lockConsumerLimits(names, { tenantId, consumers: limited, tenantLimits }) : null,
      request.due
        ? claimDueDeliveries(names, {
            tenantId,
            consumers: hosted,
            limit,
            leaseToken,
            leaseMs,
            limited,
            tenantLimits,
            floor,
          })
        : null,
    ];
    const opening = request.beginBatch ? [batchContext(this.options, tenantId, leaseToken)] : null;
    const [, fanOutRows, , dueRows] = await this.connection.claim(statements, opening);
    const result = (fanOutRows![0] as FanOutResult | undefined) ?? NOTHING_FANNED_OUT;
    if (result.position)
      this.positions?.record(tenantId, from, result.position, sentAt, performance.now(), leasesSince);
    return {
      fresh: fromFanOut(result),
      due: (dueRows as (ClaimedRow & { consumer_name: string })[]).map(toClaimedDelivery),
      fallback: result.fallback ?? null,
    };
  }

  beginBatch(leaseToken: string): Promise<void> {
    return this.connection.begin([batchContext(this.options, this.tenantId, leaseToken)]);
  }

  async commitBatch(closing: BatchClosing): Promise<{ released: number }> {
    const closed = await this.connection.commit(this.closing(closing));
    // the outcome statement (the last one) says how many event leases it deleted
    const recorded = closed[closed.length - 1] as { released: number }[];
    return { released: recorded[0]!.released };
  }

  /**
   * The closing statements of a batch transaction, sent with its `commit`: guard, the seal lifted (see
   * `sealBatch`), the session reset when the last handlers changed settings (`dirty`), the batch's context, the
   * outcomes (last). With `noWrites` (no handler asked for `context.manager`, the only way to the batch's
   * connection), nothing can have ended the transaction or changed its settings: the batch's context is still
   * pending and goes first in the same round trip (see `RoundConnection.commit`), and the outcomes follow it
   * without the guard.
   */
  private closing({ leaseToken, outcomes, dirty, noWrites }: BatchClosing): SqlStatement[] {
    const { names, tenantSetting } = this.options;
    const outcome = recordOutcomes(names, outcomes, leaseToken, { fenced: true });
    if (noWrites) return [outcome];
    return [
      ...batchGuard(tenantSetting, this.tenantId, leaseToken),
      // the seal goes once the guard found the batch's own transaction: the commit that follows is the relay's
      unsealBatch(names, leaseToken),
      ...(dirty ? resetSession() : []),
      // the batch's context again, marker included: the fenced outcome is written only where the marker is
      batchContext(this.options, this.tenantId, leaseToken),
      outcome,
    ];
  }

  async recordOutcomes({
    leaseToken,
    outcomes,
  }: {
    leaseToken: string;
    outcomes: readonly DeliveryOutcome[];
  }): Promise<{ recorded: number }> {
    const statement = recordOutcomes(this.options.names, outcomes, leaseToken);
    if (this.connection.inTransaction) {
      const [recorded] = await this.connection.commit([statement], 'outcome');
      return recordedOf(recorded!);
    }
    const [, recorded] = await this.connection.atomically([
      relayContext(this.options, this.tenantId),
      statement,
    ]);
    return recordedOf(recorded!);
  }

  async extendEventLeases({
    leaseToken,
    eventIds,
  }: {
    leaseToken: string;
    eventIds: readonly string[];
  }): Promise<void> {
    await this.connection.atomically(
      leaseExtension(this.options, this.tenantId, eventIds, leaseToken, this.byKey),
    );
  }

  rollback(): Promise<void> {
    return this.connection.rollback();
  }

  release(): Promise<void> {
    return this.connection.release();
  }

  handlerChannel(leaseToken: string): HandlerChannel {
    const { connection } = this;
    return {
      takePending: () => connection.takePending(),
      seal: sealBatch(this.options.names, leaseToken),
      wire: () => connection.wire(),
      cancelRunning: async (timeoutMs) => sendCancelRequest(await pgConnection(connection.runner), timeoutMs),
      bounded: (work) => connection.bounded('batch', work),
      tenantSetting: this.options.tenantSetting,
      tenantId: this.tenantId,
      marker: leaseToken,
      restore: () => [...resetSession(), batchContext(this.options, this.tenantId, leaseToken)],
    };
  }
}

/** The rows of `recordOutcomes`: how many it recorded. */
export function recordedOf(rows: unknown[]): { recorded: number } {
  return { recorded: (rows as { recorded: number }[])[0]!.recorded };
}

/** Sets the tenant for row-level security and an idle cap, both transaction-local (first in each transaction). */
export function relayContext(
  options: ResolvedOutboxOptions,
  tenantId: string,
  context: { durable?: boolean; byKey?: boolean } = {},
): SqlStatement {
  return setTransactionContext(options.tenantSetting, tenantId, options.relay.leaseMs, context);
}

/**
 * The statements of `extendEventLeases`: the relay's context, then the update of the leases by their key. With
 * `byKey` (`RelayPolicy.leaseProbesByKey`), planned without sequential scans, as the claims are: an update of a
 * few dozen ids otherwise scanned the whole lease table once the dead leases between two vacuums made it a few
 * hundred pages against statistics of a few hundred rows (50 ids beside 20,000 dead leases: 230 shared buffers
 * against 103 by the key; ADR 0601's addendum of 2026-12-07).
 */
export function leaseExtension(
  options: ResolvedOutboxOptions,
  tenantId: string,
  eventIds: readonly string[],
  leaseToken: string,
  byKey: boolean,
): SqlStatement[] {
  return [
    relayContext(options, tenantId, { byKey }),
    extendEventLeases(options.names, eventIds, leaseToken, options.relay.leaseMs),
  ];
}

/** The context of a batch transaction, marked with its lease token (see `BATCH_MARKER`). */
function batchContext(options: ResolvedOutboxOptions, tenantId: string, leaseToken: string): SqlStatement {
  return setTransactionContext(options.tenantSetting, tenantId, options.relay.leaseMs, {
    batch: leaseToken,
  });
}

/** The limits of the tenant's own limited consumers, as the claims take them (see `TenantConsumerLimits`). */
function tenantConsumerLimits(consumers: readonly OutboxConsumer[]): TenantConsumerLimits {
  // most tenants have no limited consumers of their own (or none at all): no filtered copy per claim then
  if (!consumers.some((c) => c.limits !== undefined)) return NO_TENANT_LIMITS;
  const limited = consumers.filter((c) => c.limits !== undefined);
  return {
    names: limited.map((c) => c.name),
    caps: limited.map((c) => c.limits!.tenantConcurrency),
    rateLimits: limited.map((c) => c.limits!.rateLimit),
    rateIntervalsMs: limited.map((c) => c.limits!.rateIntervalMs),
  };
}
