import type { INestApplicationContext } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxEventName, OutboxEventOf, OutboxPayloadOf } from '../model/outbox-event-map.interface';
import { OutboxRelay } from '../relay/outbox.relay';
import { addRound, emptyRound, type RelayRoundResult } from '../model/relay-round';
import { OutboxStore } from '../store/outbox.store';
import { setAdminTenant } from '../store/sql/admin';
import type { SqlStatement } from '../store/sql';
import * as q from '../store/sql/testing';
import { matchesPayload, type OutboxPayloadMatcher } from './payload-matcher';

/** Options of {@link OutboxTestKit.for}. */
export interface OutboxTestKitOptions {
  /**
   * Read and drain one tenant only, under its row-level security context (needed when the app's role is subject
   * to RLS). Default: every tenant, without a tenant context.
   */
  tenantId?: string;
}

/** Options of `drain`. */
export interface OutboxDrainOptions {
  /** Make retries that backoff scheduled for later due now, and run them too. Default: `true`. */
  retries?: boolean;
  /** Rounds of (drain, make retries due) before giving up with an error. Default: `50`. */
  maxRounds?: number;
}

/** One delivery of an event to one consumer, as stored. */
export interface OutboxTestDelivery {
  consumer: string;
  status: 'pending' | 'processing' | 'delivered' | 'failed' | 'dead';
  attempts: number;
  errorCode: string | null;
  error: string | null;
  nextAttemptAt: Date;
  processedAt: Date | null;
}

/** An event as committed in the outbox, typed from the app's `OutboxEventMap` by its name. */
export type OutboxEnqueuedEvent<TName extends string = string> = OutboxEventOf<TName> & {
  /** The event's status in the outbox (`pending` until the relay has fanned it out). */
  status: string;
};

/** A test kit assertion failed: the message says what was expected and what is there. */
export class OutboxTestKitError extends OutboxError {}

/** A wait that found no work stays this long before it looks again (the deadline decides, never this). */
const IDLE_PAUSE_MS = 10;

/**
 * What an app's own e2e tests need from the outbox, driving the relay themselves (build the app with
 * `relay: { enabled: false }`): drain until nothing is due, wait for a delivery, read deliveries, and assert
 * what was enqueued in committed transactions. Make one per app with `OutboxTestKit.for(app)`.
 */
export class OutboxTestKit {
  private constructor(
    private readonly relay: OutboxRelay,
    private readonly store: OutboxStore,
    private readonly options: ResolvedOutboxOptions,
    private readonly tenantId: string | null,
  ) {}

  /** The kit of an initialised app (a `TestingModule`, an `INestApplication` or an application context). */
  static for(app: INestApplicationContext, options: OutboxTestKitOptions = {}): OutboxTestKit {
    return new OutboxTestKit(
      app.get(OutboxRelay, { strict: false }),
      app.get(OutboxStore, { strict: false }),
      app.get<ResolvedOutboxOptions>(OUTBOX_RESOLVED_OPTIONS, { strict: false }),
      options.tenantId?.toLowerCase() ?? null,
    );
  }

  /**
   * Runs the relay until nothing is due: every committed event fanned out and delivered, and — with `retries`
   * (the default) — every retry that backoff scheduled for later made due at once and run, until each delivery is
   * delivered or dead. Deliveries deferred by an open webhook circuit are not waited for. Returns the totals.
   */
  async drain(options: OutboxDrainOptions = {}): Promise<RelayRoundResult> {
    const { retries = true, maxRounds = 50 } = options;
    let total = emptyRound();
    for (let round = 1; ; round++) {
      total = addRound(total, await this.relay.drain());
      if (!retries) return total;
      const [{ made_due: madeDue }] = await this.run<{ made_due: number }>(
        q.makeRetriesDue(this.options.names, this.tenantId),
      );
      if (madeDue === 0) return total;
      if (round >= maxRounds)
        throw new OutboxTestKitError(
          `the outbox still had ${madeDue} retries due after ${maxRounds} rounds of drain: a consumer that fails ` +
            'with a very high maxAttempts, or handlers that keep enqueueing; raise maxRounds or check them',
        );
    }
  }

  /**
   * Drives the relay until `eventId` is delivered to `consumer`, and returns that delivery. Throws when the
   * delivery is dead, or when `timeoutMs` passes first (saying where the delivery stands).
   */
  async waitForDelivery(
    eventId: string,
    consumer: string,
    { timeoutMs = 10_000 }: { timeoutMs?: number } = {},
  ): Promise<OutboxTestDelivery> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const delivery = (await this.deliveries(eventId)).find((d) => d.consumer === consumer);
      if (delivery?.status === 'delivered') return delivery;
      if (delivery?.status === 'dead')
        throw new OutboxTestKitError(
          `event ${eventId} was dead-lettered for consumer "${consumer}" after ${delivery.attempts} attempts: [${delivery.errorCode}] ${delivery.error}`,
        );
      if (Date.now() > deadline)
        throw new OutboxTestKitError(
          `event ${eventId} was not delivered to consumer "${consumer}" within ${timeoutMs} ms: ${
            delivery
              ? `its delivery is ${delivery.status} after ${delivery.attempts} attempts${delivery.error ? ` (${delivery.error})` : ''}`
              : `no delivery row for that consumer (${await this.describeEvent(eventId)})`
          }`,
        );
      const round = await this.drain();
      // nothing to do yet (the event's transaction has not committed): look again shortly
      if (round.eventsClaimed === 0 && round.deliveriesClaimed === 0)
        await new Promise((resolve) => setTimeout(resolve, IDLE_PAUSE_MS));
    }
  }

  /** The deliveries of an event, one per consumer, by consumer name. */
  async deliveries(eventId: string): Promise<OutboxTestDelivery[]> {
    const rows = await this.run<q.EventDeliveryRow>(
      q.eventDeliveries(this.options.names, eventId, this.tenantId),
    );
    return rows.map((row) => ({
      consumer: row.consumer_name,
      status: row.status as OutboxTestDelivery['status'],
      attempts: row.attempt_count,
      errorCode: row.error_code,
      error: row.last_error,
      nextAttemptAt: row.next_attempt_at,
      processedAt: row.processed_at,
    }));
  }

  /** The events committed so far (of one name, when given), in enqueue order. */
  async enqueued<const TName extends OutboxEventName>(
    eventName?: TName,
  ): Promise<OutboxEnqueuedEvent<TName>[]> {
    const rows = await this.run<q.EnqueuedEventRow>(
      q.enqueuedEvents(this.options.names, eventName ?? null, this.tenantId),
    );
    return rows.map(
      (row) =>
        ({
          eventId: row.id,
          eventName: row.event_name,
          tenantId: row.tenant_id,
          aggregateType: row.aggregate_type,
          aggregateId: row.aggregate_id,
          occurredAt: row.occurred_at,
          correlationId: row.correlation_id,
          schemaVersion: row.schema_version,
          data: row.payload,
          status: row.status,
        }) as unknown as OutboxEnqueuedEvent<TName>,
    );
  }

  /**
   * Asserts that exactly one event named `eventName` whose payload matches `payload` (a partial value or a
   * predicate; any payload when left out) was enqueued in a transaction that committed — the kit reads on a
   * connection of its own, so a rolled-back or still open transaction's events are not seen — and returns it.
   */
  async expectEnqueued<const TName extends OutboxEventName>(
    eventName: TName,
    payload?: OutboxPayloadMatcher<OutboxPayloadOf<TName>>,
  ): Promise<OutboxEnqueuedEvent<TName>> {
    const events = await this.enqueued(eventName);
    const matching = payload === undefined ? events : events.filter((e) => matchesPayload(e.data, payload));
    if (matching.length === 1) return matching[0]!;
    const wanted = `an event "${eventName}"${payload === undefined ? '' : ` with a payload matching ${describeMatcher(payload)}`}`;
    const found =
      events.length === 0
        ? `no committed event of that name (${await this.countOthers()})`
        : `${events.length} committed of that name, ${matching.length} matching: ${events
            .slice(0, 5)
            .map((e) => JSON.stringify(e.data))
            .join(', ')}${events.length > 5 ? ', …' : ''}`;
    throw new OutboxTestKitError(`expected exactly one committed ${wanted}, found ${found}`);
  }

  private async describeEvent(eventId: string): Promise<string> {
    const rows = await this.run<q.EnqueuedEventRow>(
      q.enqueuedEvents(this.options.names, null, this.tenantId),
    );
    const event = rows.find((row) => row.id === eventId);
    if (!event) return 'no committed event has that id';
    // a delayed event gets its delivery rows once due: a wait shorter than its delay ends here
    if (event.status === 'scheduled')
      return `the event is scheduled (a delayed event), due at ${event.deliver_at!.toISOString()}; drain delivers it once due`;
    return `the event is ${event.status}; does a consumer of that name listen to "${event.event_name}"?`;
  }

  private async countOthers(): Promise<string> {
    const rows = await this.run<q.EnqueuedEventRow>(
      q.enqueuedEvents(this.options.names, null, this.tenantId),
    );
    const names = [...new Set(rows.map((row) => row.event_name))];
    return rows.length === 0
      ? 'the outbox is empty'
      : `${rows.length} of other names: ${names.slice(0, 5).join(', ')}`;
  }

  /** Runs a statement, under the kit's tenant when it has one. */
  private async run<T>(statement: SqlStatement): Promise<T[]> {
    if (this.tenantId === null) return this.store.query<T>(statement);
    const [, rows] = await this.store.atomically([
      setAdminTenant(this.options.tenantSetting, this.tenantId),
      statement,
    ]);
    return rows as T[];
  }
}

function describeMatcher(matcher: unknown): string {
  return typeof matcher === 'function'
    ? `the predicate ${matcher.name || '(anonymous)'}`
    : JSON.stringify(matcher);
}
