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
// from its own module: a name read through './sql''s `export *` is a megamorphic load per read (issue 35)
import { wakeupTenants } from '../store/sql/wakeup';
import { inHandlerScope } from '../model/handler-scope-marker';
import { NotifyPacer } from './notify-pacer';

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;

/**
 * Wakes relays soon after an event commits, instead of at the next poll. A TypeORM subscriber sees the commit of
 * a transaction that enqueued: it wakes this process's relay at once. To wake the relays of other processes
 * (which LISTEN on a dedicated connection that reconnects by itself), the first insert after a quiet spell, and
 * under load one insert per gap or so, carries a `pg_notify` that PostgreSQL delivers when its transaction commits
 * (`carry`); the commits it does not cover get a `pg_notify` on a pooled connection after the commit. Both are
 * paced by `NotifyPacer` (the policy, switched by `RelayPolicy.wakeUpGapMs`): one carrier per gap at most, so the
 * commits that take PostgreSQL's notification lock stay few (ADR 0606). Whether an instance listens and whether it
 * notifies, `relay.wakeUps` says (its own commits always wake its own relay). A savepoint rolled back voids the
 * wake-up its transaction carried (the commit then notifies on the pool); one rolled back behind TypeORM's back
 * (`rollback to savepoint` sent as SQL) loses it unseen. Polling stays the safety net: a lost notification only
 * delays an event to the next poll. See docs/adr/0606-no-notify-in-the-app-transaction-and-the-pacer.md and ADR
 * 1004's addendum of 2026-12-06.
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
  /** The number of the latest commit with a delayed event that waits for a wake-up naming no tenant (relays promote). */
  private owedDelayed: number | null = null;
  /** Transactions whose insert asked to carry a wake-up and was refused (within the pacer's gap). */
  private readonly refusedIn = new WeakSet<QueryRunner>();
  /** Commits that asked for a wake-up so far (their numbers). */
  private commits = 0;
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
      const runner = event.queryRunner;
      if (!runner.isTransactionActive) {
        this.enqueued.delete(runner);
        this.refusedIn.delete(runner);
        return;
      }
      // a savepoint rolled back: the transaction goes on, but a wake-up carried inside it is gone with it
      // (which savepoint carried it, TypeORM does not say)
      const enqueued = this.enqueued.get(runner);
      if (enqueued?.carried) {
        enqueued.carried = null;
        enqueued.voided = true;
      }
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
   * Called by `enqueue` before an insert: the wake-up this insert is to carry (the payload of its `pg_notify`:
   * the tenants of its events and those still owed one, or none when it or an owed commit holds a delayed event),
   * or null. At most one per gap (the pacer's `mayCarry`) and one per transaction; never in a handler's batch
   * transaction, whose savepoints the relay rolls back with its own SQL, unseen by TypeORM's subscribers.
   */
  carry(runner: QueryRunner, tenants: readonly string[], delayed: boolean): CarriedWakeup | null {
    if (!this.sides.notify || this.closed || inHandlerScope(runner) || this.enqueued.get(runner)?.carried)
      return null;
    if (!this.pacer.mayCarry()) {
      this.refusedIn.add(runner);
      return null;
    }
    const named =
      delayed || this.owedDelayed !== null ? null : [...new Set([...tenants, ...this.owed.keys()])];
    const payload = named === null ? '' : q.wakeupPayload(named);
    // an empty payload has relays look for due work everywhere: it covers every tenant, and delayed events
    return { payload, tenants: payload === '' ? null : new Set(named), after: this.commits };
  }

  /**
   * Called by `enqueue` once its insert succeeded: the transaction's commit is to wake the relays, for the
   * tenants of its events due at once and, when it holds a delayed event (`delayed`), with a wake-up naming no
   * tenant, on which relays promote due delayed events and learn when the next one is due. `carried`: the
   * wake-up the insert carried (see `carry`). `tenants` is kept as given (never changed): pass a fresh array.
   */
  enqueuedIn(
    runner: QueryRunner,
    tenants: readonly string[],
    delayed = false,
    carried: CarriedWakeup | null = null,
  ): void {
    this.hook(runner.connection);
    const known = this.enqueued.get(runner);
    if (!known) {
      // one enqueue's tenants as given (one tenant: no Set per transaction); a Set once there are more
      const distinct = tenants.length > 1 ? new Set(tenants) : tenants;
      this.enqueued.set(runner, { tenants: distinct, delayed, carried, voided: false });
      return;
    }
    const all = known.tenants instanceof Set ? known.tenants : new Set(known.tenants);
    for (const tenant of tenants) all.add(tenant);
    known.tenants = all;
    known.delayed ||= delayed;
    known.carried ??= carried;
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
    const refused = this.refusedIn.delete(runner);
    const { tenants, delayed, carried } = enqueued;
    if ((tenants instanceof Set ? tenants.size : tenants.length) > 0) this.wakeRelay(tenants);
    if (delayed) this.wakeRelay();
    if (!this.sides.notify || this.closed) return;
    if (carried) this.coveredBy(carried);
    const commit = ++this.commits;
    for (const tenant of tenants) if (!carried || !covers(carried, tenant)) this.owed.set(tenant, commit);
    if (delayed && carried?.tenants !== null) this.owedDelayed = commit;
    if (carried) this.pacer.carried(this.owed.size > 0 || this.owedDelayed !== null);
    else this.pacer.request(refused || enqueued.voided);
  }

  /** A carried wake-up was delivered with its commit: the owed commits made before its insert need no other. */
  private coveredBy(carried: CarriedWakeup): void {
    for (const [tenant, commit] of this.owed)
      if (commit <= carried.after && covers(carried, tenant)) this.owed.delete(tenant);
    if (carried.tenants === null && this.owedDelayed !== null && this.owedDelayed <= carried.after)
      this.owedDelayed = null;
  }

  /** Sends one NOTIFY naming the tenants still owed a wake-up (not awaited by the commit). */
  private notify(): void {
    // a wake-up naming no tenant makes relays look for due work everywhere, the named tenants' included
    const tenants = this.owedDelayed !== null ? [] : [...this.owed.keys()];
    const owed = this.owedDelayed !== null || this.owed.size > 0;
    this.owed = new Map();
    this.owedDelayed = null;
    if (!owed) return;
    this.store
      .notify(q.notifyWakeup(this.options.names, tenants))
      .catch((error) => this.logger.warn(`wake-up NOTIFY failed (relays will poll): ${errorText(error)}`));
  }

  /** Never rejects once boot resolved the DataSource: a failure to connect or to LISTEN goes to `reconnect`. */
  private async listen(): Promise<void> {
    const connection = this.store.listenConnection({
      notification: (payload) => this.wakeRelay(wakeupTenants(payload)),
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

/** A wake-up an insert carries: its NOTIFY's payload, the tenants it names, and the commits it covers. */
export interface CarriedWakeup {
  payload: string;
  /** null: the payload names none, and wakes relays for every due tenant and for delayed events. */
  tenants: ReadonlySet<string> | null;
  /** The number of the last commit that asked for a wake-up when the insert was sent: later ones are not covered. */
  after: number;
}

/** A transaction that enqueued, until its commit. */
interface Enqueued {
  /** The tenants of its due events: the array of its one `enqueue` (at most one tenant), else a Set. */
  tenants: readonly string[] | Set<string>;
  /** It holds a delayed event (or rescheduled one). */
  delayed: boolean;
  carried: CarriedWakeup | null;
  /** A savepoint rolled back the wake-up it carried. */
  voided: boolean;
}

function covers(carried: CarriedWakeup, tenant: string): boolean {
  return carried.tenants === null || carried.tenants.has(tenant);
}
