import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import type {
  DataSource,
  EntitySubscriberInterface,
  QueryRunner,
  TransactionCommitEvent,
  TransactionRollbackEvent,
} from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { wakeUpSides } from '../options/outbox-options';
import { OUTBOX_RELAY_POLICY, type RelayPolicy } from '../options/relay-policy';
import { errorText } from '../errors/error-text';
import { OutboxStore, type ListenConnection } from '../store/outbox.store';
import * as q from '../store/sql';
import { NotifyPacer } from './notify-pacer';

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;

/**
 * Wakes relays soon after an event commits, instead of at the next poll. A TypeORM subscriber sees the commit of
 * a transaction that enqueued: it wakes this process's relay at once and, to wake the relays of other processes
 * (which LISTEN on a dedicated connection that reconnects by itself), has a `pg_notify` sent on a pooled
 * connection after the commit, paced by `NotifyPacer` (the policy, switched by `RelayPolicy.wakeUpGapMs`).
 * Whether an instance listens and whether it notifies, `relay.wakeUps` says (its own commits always wake its own
 * relay). Never a NOTIFY in the app's transaction: its commit would take PostgreSQL's notification lock, and a
 * savepoint rolled back would lose it unseen. Polling stays the safety net: a lost notification only delays an event to the next
 * poll. See docs/adr/0606-no-notify-in-the-app-transaction-and-the-pacer.md.
 */
@Injectable()
export class OutboxWakeup implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxWakeup.name);
  /** Transactions that enqueued and have not committed yet: the tenants of their events. */
  private readonly enqueued = new WeakMap<QueryRunner, Set<string>>();
  /** Of those, the transactions that enqueued a delayed event. */
  private readonly delayedIn = new WeakSet<QueryRunner>();
  /** Tenants whose commits still wait for a wake-up. */
  private owed = new Set<string>();
  /** A commit with a delayed event waits for a wake-up: the next one names no tenant (relays promote). */
  private owedDelayed = false;
  private readonly hooked = new WeakSet<DataSource>();
  private readonly pacer: NotifyPacer;
  /** Whether this instance listens, and whether it notifies (`relay.wakeUps`). */
  private readonly sides: { listen: boolean; notify: boolean };
  private listener: ListenConnection | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private reconnectDelay = RECONNECT_MIN_MS;
  private closed = false;
  private readonly subscriber: EntitySubscriberInterface = {
    afterTransactionCommit: (event: TransactionCommitEvent) => this.afterCommit(event.queryRunner),
    afterTransactionRollback: (event: TransactionRollbackEvent) => {
      // a savepoint's rollback also reports one: the transaction goes on
      if (event.queryRunner.isTransactionActive) return;
      this.enqueued.delete(event.queryRunner);
      this.delayedIn.delete(event.queryRunner);
    },
  };

  private wakeRelay: (tenants?: Iterable<string>) => void = () => undefined;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    @Inject(OUTBOX_RELAY_POLICY) policy: RelayPolicy,
  ) {
    this.pacer = new NotifyPacer(policy.wakeUpGapMs, () => this.notify());
    this.sides = wakeUpSides(options.relay);
  }

  /** The relay of this module gives its `wake` here: what a commit or a notification wakes (nothing until then). */
  subscribe(wake: (tenants?: Iterable<string>) => void): void {
    this.wakeRelay = wake;
  }

  /** Whether NOTIFYs from other instances reach this relay now: it listens, and its listener is connected. */
  get hearing(): boolean {
    return this.listener !== null && !this.closed;
  }

  async onApplicationBootstrap(): Promise<void> {
    this.hook(this.store.dataSource());
    if (this.sides.listen) await this.listen();
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    this.pacer.stop();
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const listener = this.listener;
    this.listener = null;
    await listener?.close();
    const subscribers = this.store.dataSource().subscribers;
    const index = subscribers.indexOf(this.subscriber);
    if (index >= 0) subscribers.splice(index, 1);
  }

  /**
   * Called by `enqueue` once its insert succeeded: the transaction's commit is to wake the relays, for the
   * tenants of its events due at once and, when it holds a delayed event (`delayed`), with a wake-up naming no
   * tenant, on which relays promote due delayed events and learn when the next one is due.
   */
  enqueuedIn(runner: QueryRunner, tenants: readonly string[], delayed = false): void {
    this.hook(runner.connection);
    if (delayed) this.delayedIn.add(runner);
    const known = this.enqueued.get(runner);
    if (!known) this.enqueued.set(runner, new Set(tenants));
    else for (const tenant of tenants) known.add(tenant);
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
    const delayed = this.delayedIn.delete(runner);
    if (tenants.size > 0) this.wakeRelay(tenants);
    if (delayed) this.wakeRelay();
    if (!this.sides.notify || this.closed) return;
    for (const tenant of tenants) this.owed.add(tenant);
    if (delayed) this.owedDelayed = true;
    this.pacer.request();
  }

  /** Sends one NOTIFY naming the tenants still owed a wake-up (not awaited by the commit). */
  private notify(): void {
    // a wake-up naming no tenant makes relays look for due work everywhere, the named tenants' included
    const tenants = this.owedDelayed ? [] : [...this.owed];
    const owed = this.owedDelayed || this.owed.size > 0;
    this.owed = new Set();
    this.owedDelayed = false;
    if (!owed) return;
    this.store
      .notify(q.notifyWakeup(this.options.names, tenants))
      .catch((error) => this.logger.warn(`wake-up NOTIFY failed (relays will poll): ${errorText(error)}`));
  }

  /** Never rejects once boot resolved the DataSource: a failure to connect or to LISTEN goes to `reconnect`. */
  private async listen(): Promise<void> {
    const connection = this.store.listenConnection({
      notification: (payload) => this.wakeRelay(q.wakeupTenants(payload)),
      lost: (error) => this.reconnect(connection, error),
    });
    try {
      await connection.listen(this.options.names);
      this.listener = connection;
      this.reconnectDelay = RECONNECT_MIN_MS;
      // Events committed while we were not listening: look now rather than at the next poll.
      this.wakeRelay();
    } catch (error) {
      this.reconnect(connection, error);
    }
  }

  private reconnect(connection: ListenConnection, error: unknown): void {
    if (this.closed || this.reconnectTimer || (this.listener && this.listener !== connection)) return;
    this.listener = null;
    void connection.close(); // never rejects
    this.logger.warn(
      `wake-up listener lost (${errorText(error)}); reconnecting in ${this.reconnectDelay} ms, polling meanwhile`,
    );
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.listen(); // never rejects here: its failures reconnect
    }, this.reconnectDelay);
    this.reconnectDelay = Math.min(RECONNECT_MAX_MS, this.reconnectDelay * 2);
  }
}
