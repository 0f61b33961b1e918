import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Client, type ClientConfig, type Pool } from 'pg';
import type {
  DataSource,
  EntitySubscriberInterface,
  QueryRunner,
  TransactionCommitEvent,
  TransactionRollbackEvent,
} from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import { errorText } from '../errors/error-text';
import { OutboxStore } from '../store/outbox.store';
import * as q from '../store/sql';
import { NotifyPacer } from './notify-pacer';
import { OutboxRelay } from './outbox.relay';

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;

/**
 * Wakes relays soon after an event commits, instead of at the next poll. Never inside the app's transaction:
 * a NOTIFY there serialises commits on a global lock and defeats group commit. Instead, a TypeORM subscriber
 * sees the commit of a transaction that enqueued, wakes this process's relay at once, and sends a `pg_notify` on
 * a pooled connection to wake the relays of other processes — at once after a quiet spell, one per
 * `relay.notifyGapMs` for commits closer together (see `NotifyPacer`) — which LISTEN on a dedicated connection
 * that reconnects by itself. Polling stays the safety net: a lost notification only delays an event to the next
 * poll.
 */
@Injectable()
export class OutboxWakeup implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxWakeup.name);
  /** Transactions that enqueued and have not committed yet, with the tenants of their events. */
  private readonly enqueued = new WeakMap<QueryRunner, Set<string>>();
  /** Tenants for the next NOTIFY. */
  private notifyTenants = new Set<string>();
  private readonly hooked = new WeakSet<DataSource>();
  private readonly pacer: NotifyPacer;
  private listener: Client | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private reconnectDelay = RECONNECT_MIN_MS;
  private closed = false;
  private readonly subscriber: EntitySubscriberInterface = {
    afterTransactionCommit: (event: TransactionCommitEvent) => this.afterCommit(event.queryRunner),
    afterTransactionRollback: (event: TransactionRollbackEvent) => {
      if (!event.queryRunner.isTransactionActive) this.enqueued.delete(event.queryRunner);
    },
  };

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    private readonly relay: OutboxRelay,
  ) {
    this.pacer = new NotifyPacer(options.relay.notifyGapMs, () => this.notify());
  }

  async onApplicationBootstrap(): Promise<void> {
    this.hook(this.store.dataSource());
    if (this.options.relay.enabled && this.options.relay.listen) await this.listen();
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    this.pacer.stop();
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
    const subscribers = this.store.dataSource().subscribers;
    const index = subscribers.indexOf(this.subscriber);
    if (index >= 0) subscribers.splice(index, 1);
  }

  /** Called by `enqueue`: remembers the transaction and its tenants, so that its commit wakes the relays. */
  enqueuedIn(runner: QueryRunner, tenants: readonly string[]): void {
    this.hook(runner.connection);
    const known = this.enqueued.get(runner);
    if (known) for (const tenant of tenants) known.add(tenant);
    else this.enqueued.set(runner, new Set(tenants));
  }

  private hook(dataSource: DataSource): void {
    if (this.hooked.has(dataSource)) return;
    this.hooked.add(dataSource);
    dataSource.subscribers.push(this.subscriber);
  }

  private afterCommit(runner: QueryRunner): void {
    // A savepoint release also reports a commit; only the outer commit makes the event visible.
    const tenants = this.enqueued.get(runner);
    if (runner.isTransactionActive || !tenants) return;
    this.enqueued.delete(runner);
    this.relay.wake(tenants);
    if (this.options.relay.notify) {
      for (const tenant of tenants) this.notifyTenants.add(tenant);
      if (!this.closed) this.pacer.request();
    }
  }

  /** Sends one NOTIFY naming the tenants of the commits since the last one (not awaited by the commit). */
  private notify(): void {
    const tenants = [...this.notifyTenants];
    this.notifyTenants = new Set();
    this.store
      .query(q.notifyWakeup(this.options.names, tenants))
      .catch((error) => this.logger.warn(`wake-up NOTIFY failed (relays will poll): ${errorText(error)}`));
  }

  private async listen(): Promise<void> {
    const pool = (this.store.dataSource().driver as unknown as { master: Pool }).master;
    const client = new Client(pool.options as ClientConfig);
    client.on('notification', (message) => this.relay.wake(q.wakeupTenants(message.payload)));
    client.on('error', (error) => this.reconnect(client, error));
    client.on('end', () => this.reconnect(client, new Error('connection ended')));
    try {
      await client.connect();
      await client.query(q.listenWakeup(this.options.names).text);
      this.listener = client;
      this.reconnectDelay = RECONNECT_MIN_MS;
      // Events committed while we were not listening: look now rather than at the next poll.
      this.relay.wake();
    } catch (error) {
      this.reconnect(client, error);
    }
  }

  private reconnect(client: Client, error: unknown): void {
    if (this.closed || this.reconnectTimer || (this.listener && this.listener !== client)) return;
    this.listener = null;
    client.removeAllListeners();
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    this.logger.warn(
      `wake-up listener lost (${errorText(error)}); reconnecting in ${this.reconnectDelay} ms, polling meanwhile`,
    );
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.listen();
    }, this.reconnectDelay);
    this.reconnectDelay = Math.min(RECONNECT_MAX_MS, this.reconnectDelay * 2);
  }
}
