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
import { errorText } from '../errors/error-text';
import { OutboxStore, type ListenConnection } from '../store/outbox.store';
import * as q from '../store/sql';
import { inHandlerScope } from '../model/handler-scope-marker';
import { NotifyPacer } from './notify-pacer';

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;

/**
 * Wakes relays soon after an event commits, instead of at the next poll. A TypeORM subscriber sees the commit of
 * a transaction that enqueued and wakes this process's relay at once. To wake the relays of other processes
 * (which LISTEN on a dedicated connection that reconnects by itself), the first insert after a quiet spell, and
 * under load one insert per `relay.notifyGapMs` or so, carries a `pg_notify` that PostgreSQL delivers when its
 * transaction commits; the commits it does not cover get a `pg_notify` on a pooled connection, paced (see
 * `NotifyPacer`). Only one transaction per gap carries one: a NOTIFY in every app transaction would make their
 * commits take PostgreSQL's notification lock one after another. Polling stays the safety net: a lost
 * notification only delays an event to the next poll. See docs/adr/0606-no-notify-in-the-app-transaction-and-the-pacer.md
 * and docs/adr/0805-wake-ups-ride-in-an-insert.md.
 */
@Injectable()
export class OutboxWakeup implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxWakeup.name);
  /** Transactions that enqueued and have not committed yet: the tenants of their events, the wake-up they carry. */
  private readonly enqueued = new WeakMap<QueryRunner, Enqueued>();
  /**
   * Tenants whose commits still wait for a wake-up, each with the number of its latest such commit: a carried
   * wake-up covers the commits made before its insert was sent, not those after (they may commit after it).
   */
  private owed = new Map<string, number>();
  private commits = 0;
  private readonly hooked = new WeakSet<DataSource>();
  private readonly pacer: NotifyPacer;
  private listener: ListenConnection | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private reconnectDelay = RECONNECT_MIN_MS;
  private closed = false;
  private readonly subscriber: EntitySubscriberInterface = {
    afterTransactionCommit: (event: TransactionCommitEvent) => this.afterCommit(event.queryRunner),
    afterTransactionRollback: (event: TransactionRollbackEvent) => {
      const runner = event.queryRunner;
      if (!runner.isTransactionActive) this.enqueued.delete(runner);
      else {
        // a savepoint rolled back: a wake-up carried inside it is gone with it (which one, TypeORM does not say)
        const enqueued = this.enqueued.get(runner);
        if (enqueued) enqueued.carried = null;
      }
    },
  };

  private wakeRelay: (tenants?: Iterable<string>) => void = () => undefined;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
  ) {
    this.pacer = new NotifyPacer(options.relay.notifyGapMs, () => this.notify());
  }

  /** The relay of this module gives its `wake` here: what a commit or a notification wakes (nothing until then). */
  subscribe(wake: (tenants?: Iterable<string>) => void): void {
    this.wakeRelay = wake;
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
    await listener?.close();
    const subscribers = this.store.dataSource().subscribers;
    const index = subscribers.indexOf(this.subscriber);
    if (index >= 0) subscribers.splice(index, 1);
  }

  /**
   * Called by `enqueue` before its insert: the wake-up this insert should carry (the payload of its `pg_notify`:
   * its tenants and those still owed one), or null. At most one per gap, and one per transaction; none in a
   * handler's batch transaction (see `IN_HANDLER_SCOPE`).
   */
  carry(runner: QueryRunner, tenants: readonly string[]): CarriedWakeup | null {
    if (!this.options.relay.notify || this.closed || inHandlerScope(runner)) return null;
    if (this.enqueued.get(runner)?.carried) return null;
    if (!this.pacer.mayCarry()) return null;
    const named = [...new Set([...tenants, ...this.owed.keys()])];
    const payload = q.wakeupPayload(named);
    // an empty payload has relays look for every due tenant: it covers them all
    return { payload, tenants: payload === '' ? null : new Set(named), after: this.commits };
  }

  /**
   * Called by `enqueue` once its insert succeeded: remembers the transaction, its tenants and the wake-up its
   * insert carried, so that its commit wakes the relays.
   */
  enqueuedIn(runner: QueryRunner, tenants: readonly string[], carried: CarriedWakeup | null = null): void {
    this.hook(runner.connection);
    const known = this.enqueued.get(runner);
    if (!known) this.enqueued.set(runner, { tenants: new Set(tenants), carried });
    else {
      for (const tenant of tenants) known.tenants.add(tenant);
      known.carried ??= carried;
    }
  }

  private hook(dataSource: DataSource): void {
    if (this.hooked.has(dataSource)) return;
    this.hooked.add(dataSource);
    dataSource.subscribers.push(this.subscriber);
  }

  private afterCommit(runner: QueryRunner): void {
    // A savepoint release also reports a commit; only the outer commit makes the event visible.
    const enqueued = this.enqueued.get(runner);
    if (runner.isTransactionActive || !enqueued) return;
    this.enqueued.delete(runner);
    this.wakeRelay(enqueued.tenants);
    if (!this.options.relay.notify || this.closed) return;
    const { carried } = enqueued;
    if (carried) {
      // delivered with this commit: it covers the commits owed before its insert, and this one's named tenants
      for (const [tenant, commit] of this.owed)
        if (commit <= carried.after && covers(carried, tenant)) this.owed.delete(tenant);
    }
    for (const tenant of enqueued.tenants)
      if (!carried || !covers(carried, tenant)) this.owed.set(tenant, ++this.commits);
    if (carried) this.pacer.carried(this.owed.size > 0);
    else this.pacer.request();
  }

  /** Sends one NOTIFY naming the tenants still owed a wake-up (not awaited by the commit). */
  private notify(): void {
    const tenants = [...this.owed.keys()];
    this.owed = new Map();
    if (tenants.length === 0) return;
    this.store
      .query(q.notifyWakeup(this.options.names, tenants))
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

/** A wake-up an insert carries: its NOTIFY's payload and the tenants it names, and the commits it covers. */
export interface CarriedWakeup {
  payload: string;
  /** null: the payload names none, and wakes relays for every due tenant. */
  tenants: ReadonlySet<string> | null;
  /** The number of the last owed commit when the insert was sent: later ones are not covered. */
  after: number;
}

interface Enqueued {
  tenants: Set<string>;
  carried: CarriedWakeup | null;
}

function covers(carried: CarriedWakeup, tenant: string): boolean {
  return carried.tenants === null || carried.tenants.has(tenant);
}
