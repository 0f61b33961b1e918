import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { randomUUID } from 'node:crypto';
import type { EntityManager, QueryRunner } from 'typeorm';
import {
  OutboxConfigurationError,
  OutboxError,
  OutboxTransactionEndedError,
  OutboxValidationError,
} from '../errors/outbox.error';
import { sqlState } from '../errors/sql-state';
import { TransactionControl } from '../batch/transaction-control';
import { inTransactionBlock, pgConnection } from '../store/pipeline';
import {
  BATCH_ENDED_SQLSTATE,
  TENANT_CHANGED_SQLSTATE,
  batchGuard,
  resetSession,
} from '../store/sql/transaction-context';
import { SINGLE_TENANT_ID } from '../model/outbox.constants';
import { OutboxStore } from '../store/outbox.store';
import * as q from './inbox-sql';
import type { OutboxNames } from '../model/table-names';
import { AmbientTransactions } from '../cls/ambient-transactions';
import { errorText } from '../errors/error-text';
import { backoffDelayMs } from '../model/backoff';
import { OUTBOX_MESSAGE_HEADERS } from '../model/message-headers';
import { inboxEventId } from './inbox-key';
import { inboxMessages } from './inbox.messages';
import { OUTBOX_INBOX_OPTIONS, consumerProblem, maxDeliveriesProblem } from './outbox-inbox-options';
import type { ResolvedInboxOptions } from './outbox-inbox-options.interface';
import type {
  OutboxInboxConsumerOptions,
  OutboxInboxContext,
  OutboxInboxHandler,
  OutboxInboxMessage,
  OutboxInboxOutcome,
} from './outbox-inbox.interfaces';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One delivery of a message to a consumer, as the failure paths need it. */
interface Delivery {
  message: OutboxInboxMessage;
  key: q.InboxKey;
  messageId: string;
  /** The broker's delivery number, or null. */
  deliveryCount: number | null;
  maxDeliveries: number;
}

/** A message's key without its consumer, or why it cannot be processed at all. */
type Received =
  | { key: Omit<q.InboxKey, 'consumer'>; messageId: string; deliveryCount: number | null }
  | { problem: string };

/**
 * The inbox of messages from a broker: runs a consumer's handler once per message and tenant, in a transaction
 * that first records the message for that consumer in `consumer_inbox`, with the message's tenant set for
 * row-level security. A duplicate is acknowledged without calling the handler; a handler that throws (or ends the
 * transaction, which its `context.manager` refuses: see `TransactionControl`) rolls its writes back with the
 * record, and the message is handed back for redelivery until its deliveries are used up, then dead-lettered
 * (its row `dead`, counted by `OutboxAdminService.stats`).
 */
@Injectable()
export class OutboxInbox {
  private readonly logger = new Logger(OutboxInbox.name);

  constructor(
    @Inject(OUTBOX_INBOX_OPTIONS) private readonly options: ResolvedInboxOptions,
    @Optional() @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly outbox?: ResolvedOutboxOptions,
    @Optional() private readonly store?: OutboxStore,
    @Optional() private readonly ambient?: AmbientTransactions,
  ) {}

  /**
   * Processes one message for `consumer` and settles it with the broker (ack, retry or dead-letter): make the
   * message with `amqpInboxMessage(channel, msg)` or `jetStreamInboxMessage(msg)`. `handler(payload, context)`
   * writes through `context.manager`. Resolves to what became of the message; rejects only on a bad consumer
   * name or option (a handler's error is the message's failure, not the caller's).
   */
  async handle<TPayload = unknown>(
    consumer: string,
    message: OutboxInboxMessage,
    handler: OutboxInboxHandler<TPayload>,
    options: OutboxInboxConsumerOptions = {},
  ): Promise<OutboxInboxOutcome> {
    const badName = consumerProblem('OutboxInbox.handle', consumer);
    if (badName) throw new OutboxValidationError('consumer', badName);
    const badMax =
      options.maxDeliveries === undefined
        ? null
        : maxDeliveriesProblem('OutboxInbox.handle', options.maxDeliveries);
    if (badMax) throw new OutboxValidationError('maxDeliveries', badMax);
    const maxDeliveries = options.maxDeliveries ?? this.options.maxDeliveries;
    const received = this.receive(message);
    if ('problem' in received) {
      this.logger.error(`inbox ${consumer}: dead-lettering a message: ${received.problem}`);
      await this.settle(consumer, () => message.deadLetter());
      return 'dead';
    }
    const key: q.InboxKey = { ...received.key, consumer };
    const failure: Delivery = {
      message,
      key,
      messageId: received.messageId,
      deliveryCount: received.deliveryCount,
      maxDeliveries,
    };
    let payload: TPayload;
    try {
      payload = message.payload() as TPayload;
    } catch (error) {
      return this.failed(failure, inboxMessages.badPayload(errorText(error)), true);
    }

    const { store, tenantSetting, names } = this.wired();
    const runner = store.dataSource().createQueryRunner();
    // marks this transaction: a handler that ends it and begins another is found before the commit
    const marker = randomUUID();
    const control = new TransactionControl({
      refused: (what) => inboxMessages.transactionControl(consumer, what),
      leftOpen: () => inboxMessages.transactionLeftOpen(consumer),
    });
    const used = { manager: false, settings: false };
    let attempt: number | null = null;
    let thrown: { error: unknown } | null = null;
    try {
      await runner.startTransaction();
      await store.rows(runner, q.setInboxTenant(tenantSetting, key.tenantId, marker));
      const [claim] = await store.rows<q.InboxClaimRow>(runner, q.claimInboxMessage(names, key));
      if (claim) {
        attempt = claim.attempts;
        const context: OutboxInboxContext = {
          manager: this.handlerManager(runner, control, consumer, used),
          consumer,
          messageId: received.messageId,
          tenantId: key.tenantId,
          eventName: message.header(OUTBOX_MESSAGE_HEADERS.event) ?? null,
          attempt,
          deliveryCount: received.deliveryCount,
          header: (name) => message.header(name),
        };
        await this.bound(handler)(payload, context);
        control.settle();
        await this.guard(runner, consumer, { tenantId: key.tenantId, marker, used });
      }
      await runner.commitTransaction();
    } catch (error) {
      thrown = { error };
      await control.closeNested(runner).catch(() => undefined);
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
    } finally {
      await runner.release();
    }
    if (thrown && attempt !== null) return this.failed(failure, errorText(thrown.error), false);
    // the record could not be written (database unreachable, grants, row-level security): not the message's fault
    if (thrown) return this.unrecorded(failure, `could not be recorded: ${errorText(thrown.error)}`);
    await this.settle(consumer, () => message.ack());
    if (attempt === null) {
      this.logger.debug(`inbox ${consumer}: message ${received.messageId} is a duplicate, skipped`);
      return 'duplicate';
    }
    return 'processed';
  }

  /**
   * The handler's `context.manager`: on the inbox transaction's runner, guarded by `control`. Notes in `used`
   * that the handler sent a query, and one that may change settings; refuses a query once the transaction is
   * gone (the handler ended it on the driver's connection), which would commit on its own.
   */
  private handlerManager(
    runner: QueryRunner,
    control: TransactionControl,
    consumer: string,
    used: { manager: boolean; settings: boolean },
  ): EntityManager {
    const view = control.view(runner, {
      send: async (target, args, changesSettings) => {
        used.manager = true;
        used.settings ||= changesSettings;
        if (!inTransactionBlock(await pgConnection(runner)))
          throw new OutboxTransactionEndedError(inboxMessages.transactionEnded(consumer));
        return target.query(...(args as [string, unknown[]])) as Promise<unknown>;
      },
    });
    return this.wired().store.dataSource().createEntityManager(view);
  }

  /**
   * Before the commit of a handler's transaction, the relay's checks: that the transaction is still open (the
   * handler may have ended it on the driver's connection, past the view) and, when the handler used
   * `context.manager`, the relay's guard (`batchGuard`): that it is still the inbox's transaction (its marker), in
   * the message's tenant. A handler that ended it and began another one would otherwise have its later writes
   * committed without the message's record, or under another tenant. Settings or the role the handler may have
   * changed are reset before the commit (`resetSession`): they do not outlive the message on the pooled
   * connection.
   */
  private async guard(
    runner: QueryRunner,
    consumer: string,
    {
      tenantId,
      marker,
      used,
    }: { tenantId: string; marker: string; used: { manager: boolean; settings: boolean } },
  ): Promise<void> {
    const { store, tenantSetting } = this.wired();
    if (!inTransactionBlock(await pgConnection(runner)))
      throw new OutboxTransactionEndedError(inboxMessages.transactionEnded(consumer));
    if (!used.manager) return;
    try {
      for (const statement of batchGuard(tenantSetting, tenantId, marker))
        await store.rows(runner, statement);
    } catch (error) {
      if (sqlState(error) === BATCH_ENDED_SQLSTATE)
        throw new OutboxTransactionEndedError(inboxMessages.transactionEnded(consumer));
      if (sqlState(error) === TENANT_CHANGED_SQLSTATE)
        throw new OutboxError(inboxMessages.tenantChanged(consumer, tenantSetting, tenantId));
      throw error;
    }
    if (used.settings) for (const statement of resetSession()) await store.rows(runner, statement);
  }

  /** Reads the message's id, tenant and delivery count, or says why it cannot be processed. */
  private receive(message: OutboxInboxMessage): Received {
    const id = message.id;
    if (typeof id !== 'string' || id.length === 0) return { problem: inboxMessages.noMessageId() };
    const header = OUTBOX_MESSAGE_HEADERS.tenant;
    const tenant = message.header(header);
    let tenantId: string;
    if (tenant === undefined && this.wired().tenancy === 'single') tenantId = SINGLE_TENANT_ID;
    else if (tenant !== undefined && UUID_PATTERN.test(tenant)) tenantId = tenant.toLowerCase();
    else return { problem: inboxMessages.badTenant(header, tenant) };
    const count = message.deliveryCount;
    const deliveryCount = Number.isSafeInteger(count) && (count as number) >= 1 ? (count as number) : null;
    return { key: { ...inboxEventId(id), tenantId }, messageId: id, deliveryCount };
  }

  /**
   * Records a failed delivery in a transaction of its own and settles the message: dead-lettered once its
   * deliveries are used up (or at once when `dead`), else handed back for redelivery after the backoff.
   */
  private async failed(f: Delivery, error: string, dead: boolean): Promise<OutboxInboxOutcome> {
    const { message, key, messageId, maxDeliveries } = f;
    const where = `inbox ${key.consumer}: message ${messageId} (tenant ${key.tenantId})`;
    let row: q.InboxFailureRow | undefined;
    try {
      const { store, tenantSetting, names } = this.wired();
      [row] = await store.transaction(async (runner) => {
        await store.rows(runner, q.setInboxTenant(tenantSetting, key.tenantId));
        return store.rows<q.InboxFailureRow>(
          runner,
          q.recordInboxFailure(names, key, { error, maxDeliveries, dead }),
        );
      });
    } catch (recordError) {
      return this.unrecorded(
        f,
        `failed (${error}) and the failure could not be recorded: ${errorText(recordError)}`,
      );
    }
    if (!row) {
      // another delivery of the message committed meanwhile
      await this.settle(key.consumer, () => message.ack());
      return 'duplicate';
    }
    if (row.status === 'dead') {
      this.logger.error(`${where} dead-lettered after ${row.attempts} deliveries: ${error}`);
      await this.settle(key.consumer, () => message.deadLetter());
      return 'dead';
    }
    if (message.redeliverable === false)
      this.logger.error(
        `${where} failed on delivery ${row.attempts} of ${maxDeliveries}, and its transport cannot redeliver it: ${error}`,
      );
    else
      this.logger.warn(
        `${where} failed on delivery ${row.attempts} of ${maxDeliveries}, redelivering: ${error}`,
      );
    await this.settle(key.consumer, () =>
      message.retry(backoffDelayMs(row.attempts, this.options.redelivery)),
    );
    return 'retry';
  }

  /** Hands back a message whose delivery left no record (so it is not counted), after the backoff of its count. */
  private async unrecorded(f: Delivery, why: string): Promise<OutboxInboxOutcome> {
    this.logger.error(
      `inbox ${f.key.consumer}: message ${f.messageId} (tenant ${f.key.tenantId}) ${why}; redelivering`,
    );
    await this.settle(f.key.consumer, () =>
      f.message.retry(backoffDelayMs(f.deliveryCount ?? 1, this.options.redelivery)),
    );
    return 'retry';
  }

  /** The handler, run as the host's transaction when the outbox's `transactionHost` option is on. */
  private bound<TPayload>(
    handler: OutboxInboxHandler<TPayload>,
  ): (payload: TPayload, context: OutboxInboxContext) => Promise<unknown> {
    const ambient = this.ambient;
    if (!ambient) return async (payload, context) => handler(payload, context);
    return async (payload, context) =>
      ambient.bound(() => handler(payload, context))(null as never, {
        manager: context.manager,
        attempt: context.attempt,
        consumer: context.consumer,
        // only the manager is read (the TransactionHost's); the inbox handler gets its own context above
        retryAfter: () => undefined,
      });
  }

  /** Acks, nacks or terms; a broker that cannot be told (its channel closed) redelivers by itself. */
  private async settle(consumer: string, action: () => void | Promise<void>): Promise<void> {
    try {
      await action();
    } catch (error) {
      this.logger.warn(
        `inbox ${consumer}: could not settle a message with the broker (it will redeliver it): ${errorText(error)}`,
      );
    }
  }

  /** What the inbox needs of the outbox module; a clear error when the app did not import it. */
  private wired(): {
    store: OutboxStore;
    tenantSetting: string;
    tenancy: 'multi' | 'single';
    names: OutboxNames;
  } {
    if (!this.store || !this.outbox) throw new OutboxConfigurationError([inboxMessages.missingOutbox()]);
    const { tenantSetting, tenancy, names } = this.outbox;
    return { store: this.store, tenantSetting, tenancy, names };
  }
}
