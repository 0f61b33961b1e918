import { Logger } from '@nestjs/common';
import type { Pool, PoolClient } from 'pg';
import type { QueryRunner } from 'typeorm';
import { OutboxStallError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxRelayStall, OutboxRoundTrip } from '../model/outbox-relay-stall.interface';

/** How the round trips read in the relay's warnings (`OutboxRoundTrip` beside them, as health and stats say it). */
const LABELS: Record<OutboxRoundTrip, string> = {
  claim: 'claim',
  batch: 'batch',
  outcome: 'outcome record',
  leaseExtension: 'lease extension',
  subscriptions: "read of the tenant's webhook subscriptions",
  dueTenantScan: 'scan for due tenants',
  promotion: 'promotion of due delayed events',
  heartbeat: 'registry heartbeat',
  leaseVacuum: 'lease vacuum',
  listen: 'wake-up listener check',
  healthCheck: 'health check',
  retention: 'retention purge',
  metrics: 'metrics read',
};

/**
 * Idle time before the first TCP keepalive probe on the pool connections the relay uses (when the pool does not
 * set `keepAlive` itself), and on its wake-up listener's connection: a peer that is gone (a host down, a network
 * partition) is noticed by the kernel on an idle connection, not only by the next round trip's deadline.
 */
export const KEEPALIVE_IDLE_MS = 10_000;

/** What the relay reaches of pg's client (fields pg has no typed accessor for). */
export interface PgClient {
  connection: { stream: { destroy(error?: Error): void; setKeepAlive(on: boolean, ms: number): void } };
}

/** The options pg's client reads for each query (its `query_timeout`, from the pool's options). */
interface PgParameters {
  connectionParameters: { query_timeout?: number | false };
}

/**
 * A round trip waiting for its answer (see `RoundTripDeadline.wait`): its deadline, what it runs on (how it is
 * given up), how its promise settles, and its links in the list of those waiting (a set's table, added to and
 * deleted from twice per event, is made anew as its deleted entries pile up). One object per round trip, its
 * behaviour in `RoundTripDeadline`: not the six closures and three contexts a round trip made before (issue 35).
 */
class Waiting {
  previous: Waiting | null = null;
  next: Waiting | null = null;
  /** Given up: its work's late answer is ignored. */
  expired = false;

  constructor(
    /** Its deadline, on `performance.now()`'s clock. */
    readonly due: number,
    /** The runner of a pool connection (`within`), or null for a client of the relay's own (`withinClient`). */
    readonly runner: QueryRunner | null,
    readonly client: PgClient | null,
    readonly trip: OutboxRoundTrip,
    readonly tenantId: string | null,
    readonly running: Promise<unknown>,
    readonly resolve: (value: unknown) => void,
    readonly reject: (error: Error) => void,
  ) {}
}

/** What TypeORM's PostgresQueryRunner holds while it connects and once connected. */
interface PgRunner {
  databaseConnection?: PoolClient;
  databaseConnectionPromise?: Promise<PoolClient>;
}

/**
 * Bounds every wait of the relay on the database on the client side: pg has no deadline of its own for a query
 * (the relay's statement bounds are server-side, and a server that hangs, or a network that drops its packets,
 * serves neither them nor a cancel). Each round trip (`OutboxRoundTrip`) gets `relay.roundTripTimeoutMs`, a
 * little over the relay's own statement bound (`relay.leaseMs`, see `setTransactionContext`): a statement that is
 * merely slow is cancelled by the server first, and past the lease what the round claimed is no longer its own
 * anyway (another relay may take it over; the fence keeps this one's late writes out). Past the deadline, the
 * connection's socket is destroyed (pg fails every query on it; TypeORM hands it back to the pool with the
 * error, which closes it for good), the pool's idle connections are closed too (made to the same server, they
 * would each wait as long), and the wait rejects with an `OutboxStallError`: the round fails and the next one
 * starts on a fresh connection. The stall is logged once, kept for the health indicator and `stats`, and over once
 * a round trip begun after it is answered. `ms` 0 turns the bound off.
 *
 * The cost is an entry in a list per round trip, and one timer for all of them (see `wait`; a timer per round trip
 * until ADR 1005's addendum of 2026-12-07); measured in bench/decisions/round-trip-deadline.ts and
 * docs/adr/0809-client-side-deadline-per-round-trip.md.
 */
export class RoundTripDeadline {
  private readonly logger = new Logger('OutboxRelay');
  private latest: OutboxRelayStall | null = null;
  /** When the latest stall happened (`performance.now()`): a round trip begun after it and answered ends it. */
  private stalledAt = Infinity;
  private readonly keptAlive = new WeakSet<PoolClient>();
  /** The pool's `query_timeout` of the connections a round trip of the relay's runs on, while it runs. */
  private readonly queryTimeouts = new WeakMap<PoolClient, number>();
  /** Round trips waiting for their answer, in the order they began: a list through their own links (see `wait`). */
  private first: Waiting | null = null;
  private last: Waiting | null = null;
  /** The one timer of the round trips' deadlines (see `wait`), or null when none is armed. */
  private timer: NodeJS.Timeout | null = null;
  /** The resolvers of the promise `bound` just made (see `takeResolvers`). */
  private resolveNext: (value: unknown) => void = noop;
  private rejectNext: (error: Error) => void = noop;
  /** A promise's executor, made once: it runs synchronously in `new Promise`, and `bound` takes what it kept. */
  private readonly takeResolvers = (
    resolve: (value: unknown) => void,
    reject: (error: Error) => void,
  ): void => {
    this.resolveNext = resolve;
    this.rejectNext = reject;
  };

  constructor(readonly ms: number) {}

  /** The latest stall on this instance (a copy; `recoveredAt` null while it lasts), or null when none happened. */
  get stall(): OutboxRelayStall | null {
    return this.latest && { ...this.latest };
  }

  /** True from a stall until a round trip begun after it is answered. */
  get stalled(): boolean {
    return this.latest !== null && this.latest.recoveredAt === null;
  }

  /**
   * The runner's pg connection (connected on first use, within the caller's deadline), with TCP keepalive on
   * unless the pool set it itself.
   */
  connect(runner: QueryRunner): Promise<PoolClient> {
    // TypeORM's promise, followed (no async function around a single wait: a promise less per visit, issue 35)
    return (runner.connect() as Promise<PoolClient>).then((client) => {
      this.setAsideQueryTimeout(client);
      if (!this.keptAlive.has(client)) {
        this.keptAlive.add(client);
        const connection = (client as unknown as { connection: { _keepAlive?: boolean } }).connection;
        if (!connection._keepAlive)
          (client as unknown as PgClient).connection.stream.setKeepAlive(true, KEEPALIVE_IDLE_MS);
      }
      return client;
    });
  }

  /**
   * Runs `work`, a round trip on `runner`'s connection, and waits for it at most `ms`: past that, gives the
   * connection up (see the class) and rejects with an `OutboxStallError` naming `trip` and `tenantId`.
   */
  within<T>(
    runner: QueryRunner,
    trip: OutboxRoundTrip,
    tenantId: string | null,
    work: () => Promise<T>,
  ): Promise<T> {
    if (this.ms === 0) return work();
    const client = heldBy(runner);
    if (client) this.setAsideQueryTimeout(client);
    return this.bound(work, runner, null, trip, tenantId);
  }

  /** As `within`, for a pg client of the relay's own (the wake-up listener's): past `ms`, it is destroyed. */
  withinClient<T>(client: PgClient, trip: OutboxRoundTrip, work: () => Promise<T>): Promise<T> {
    return this.bound(work, null, client, trip, null);
  }

  /**
   * Sets the pool's `query_timeout` (TypeORM's `extra`) aside on a connection while a round trip of the relay's
   * runs on it: pg applies it to every query of the pool's connections, and one shorter than the deadline would
   * fail the relay's statements (TypeORM's `START TRANSACTION` and `COMMIT` among them, which take no options
   * per query) with pg's `Query read timeout` before the deadline, as a failed round rather than a stall, its
   * connection left waiting for the reply. The deadline is their client-side bound; the app's queries, a
   * handler's too, keep the pool's. A pool without it costs a property read per round trip.
   */
  private setAsideQueryTimeout(client: PoolClient): void {
    if (this.ms === 0) return;
    const parameters = (client as unknown as PgParameters).connectionParameters;
    const ms = parameters?.query_timeout;
    if (!ms || this.queryTimeouts.has(client)) return;
    this.queryTimeouts.set(client, ms);
    parameters.query_timeout = false;
  }

  /** Gives a connection its pool's `query_timeout` back (see `setAsideQueryTimeout`). */
  private restoreQueryTimeout(client: PoolClient): void {
    const ms = this.queryTimeouts.get(client);
    if (ms === undefined) return;
    this.queryTimeouts.delete(client);
    (client as unknown as PgParameters).connectionParameters.query_timeout = ms;
  }

  /**
   * `work`, or an `OutboxStallError` once `ms` passed without its answer (see `expire`); the connection's
   * `query_timeout` given back once `work` settles (even after the stall). One promise per round trip, no race
   * of two promises and no async wrapper: it runs on every round trip of the relay. No timer of its own either
   * (see `wait`); one object for what it needs (see `Waiting`) and the two callbacks of its work's answer.
   */
  private bound<T>(
    work: () => Promise<T>,
    runner: QueryRunner | null,
    client: PgClient | null,
    trip: OutboxRoundTrip,
    tenantId: string | null,
  ): Promise<T> {
    if (this.ms === 0) return work();
    const began = performance.now();
    let running: Promise<T>;
    try {
      running = work();
    } catch (error) {
      // as the executor of a promise around it would have: a rejection, nothing waiting
      return Promise.reject(error as Error);
    }
    // the promise's resolvers taken by an executor made once per instance (`takeResolvers`), not one per round trip
    const promise = new Promise<unknown>(this.takeResolvers) as Promise<T>;
    const waiting = new Waiting(
      began + this.ms,
      runner,
      client,
      trip,
      tenantId,
      running,
      this.resolveNext,
      this.rejectNext,
    );
    // kept no longer than this call: they would hold the promise, and what waits on it, until the next round trip
    this.resolveNext = noop;
    this.rejectNext = noop;
    this.wait(waiting);
    running.then(
      (result) => {
        this.answered(waiting);
        if (runner !== null) this.restoreHeld(runner);
        if (waiting.expired) return;
        if (began > this.stalledAt) this.recovered();
        waiting.resolve(result);
      },
      (error: Error) => {
        this.answered(waiting);
        if (runner !== null) this.restoreHeld(runner);
        waiting.reject(error);
      },
    );
    return promise;
  }

  /** Past its deadline: the round trip's connection given up (see the class), its promise rejected. */
  private expire(waiting: Waiting): void {
    waiting.expired = true;
    waiting.running.catch(noop); // it fails once its connection is gone: the stall is what is reported
    const { runner, client } = waiting;
    const error = this.record(waiting.trip, waiting.tenantId, runner !== null && !heldBy(runner));
    if (runner !== null) giveUp(runner, error);
    else client!.connection.stream.destroy(error);
    waiting.reject(error);
  }

  /** The connection a round trip ended on (it may have connected in it) gets its `query_timeout` back. */
  private restoreHeld(runner: QueryRunner): void {
    const used = heldBy(runner);
    if (used) this.restoreQueryTimeout(used);
  }

  /**
   * Waits for a round trip's deadline. Every round trip has the same `ms`, so their deadlines come in the order
   * they began: one timer serves them all, armed for the earliest and, when it fires, given them up as far as
   * they are due and armed again for the next one. Answered round trips leave the set at once; the timer stays
   * armed and fires no later than the first deadline. A relay at a low rate arms a timer per `ms`, not one per
   * round trip (two per event; issue 35). Unreferenced: it keeps no process alive, and a round trip waits on a
   * pg socket, which does.
   */
  private wait(waiting: Waiting): void {
    const last = this.last;
    if (last === null) this.first = waiting;
    else {
      last.next = waiting;
      waiting.previous = last;
    }
    this.last = waiting;
    if (this.timer === null) this.arm(this.ms);
  }

  /** A round trip answered (or given up): out of the list, no deadline of its own any more. */
  private answered(waiting: Waiting): void {
    const { previous, next } = waiting;
    if (previous !== null) previous.next = next;
    else if (this.first === waiting) this.first = next;
    else return; // out of the list already
    if (next !== null) next.previous = previous;
    else this.last = previous;
    waiting.previous = waiting.next = null;
  }

  /** Arms the deadlines' timer to fire in `ms`, unreferenced (see `wait`). */
  private arm(ms: number): void {
    this.timer = setTimeout(this.expireDue, ms);
    this.timer.unref();
  }

  /** The timer's callback: gives up the round trips past their deadline, then waits for the next one's. */
  private readonly expireDue = (): void => {
    this.timer = null;
    const now = performance.now();
    for (let waiting = this.first; waiting !== null; waiting = this.first) {
      if (waiting.due > now) return this.arm(waiting.due - now);
      this.answered(waiting);
      this.expire(waiting);
    }
  };

  /** Records a stall and logs it (once for the round trips that give up together); returns its error. */
  private record(trip: OutboxRoundTrip, tenantId: string | null, connecting: boolean): OutboxStallError {
    const label = LABELS[trip] === trip ? trip : `${LABELS[trip]} (${trip})`;
    const error = new OutboxStallError(messages.stall(label, tenantId, this.ms, connecting));
    this.stalledAt = performance.now();
    // round trips in flight give up together: the first one is the stall reported, once
    if (this.stalled) return error;
    this.latest = {
      roundTrip: trip,
      tenantId,
      waitedMs: this.ms,
      at: new Date().toISOString(),
      recoveredAt: null,
    };
    this.logger.warn(error.message);
    return error;
  }

  private recovered(): void {
    const latest = this.latest;
    this.stalledAt = Infinity;
    if (!latest || latest.recoveredAt !== null) return;
    latest.recoveredAt = new Date().toISOString();
    this.logger.log(
      messages.stallOver(LABELS[latest.roundTrip], Date.parse(latest.recoveredAt) - Date.parse(latest.at)),
    );
  }
}

/** The pg connection the runner holds, or undefined while it has none (or still connects). */
function heldBy(runner: QueryRunner): PoolClient | undefined {
  return (runner as unknown as PgRunner).databaseConnection;
}

function noop(): void {}

/** What the relay reaches of pg-pool's pool: its connections (some still connecting), and those idle. */
interface PoolInternals {
  _clients?: (PgClient & { _connecting?: boolean })[];
  _idle?: { client: PoolClient }[];
}

/**
 * Closes the runner's connection (or the one it still waits for from the pool) and the pool's idle ones: made to
 * the server that stopped answering, each would wait a deadline of its own before the relay reached a fresh one
 * (behind a DNS name or a virtual IP, the next ones go to the promoted server). pg-pool has no call for it: their
 * sockets are destroyed, and the pool drops each one (an idle one is reported as a pool error, which TypeORM logs).
 */
function giveUp(runner: QueryRunner, error: OutboxStallError): void {
  const { databaseConnection: held, databaseConnectionPromise: coming } = runner as unknown as PgRunner;
  const pool = (runner.connection.driver as unknown as { master?: Pool }).master as PoolInternals | undefined;
  if (held) destroy(held, error);
  else {
    // The pool's connect got no reply: its connections still connecting go to the server that does not answer
    // (pg-pool bounds a connect only by connectionTimeoutMillis) and would hold the pool's places for good; they
    // fail now (their callers get this error). A connection that comes anyway is closed, never kept.
    for (const client of pool?._clients ?? [])
      if (client._connecting) client.connection.stream.destroy(error);
    void coming?.then(
      (client) => {
        if (!runner.isReleased) destroy(client, error);
        else release(client, error);
      },
      () => undefined,
    );
  }
  for (const { client } of [...(pool?._idle ?? [])]) destroy(client, error);
}

/** Destroys a connection's socket: pg fails its queries with `error`, and the pool drops it. */
function destroy(client: PoolClient, error: Error): void {
  (client as unknown as PgClient).connection.stream.destroy(error);
}

/** Hands a connection no runner holds any more back to the pool with an error: the pool closes it. */
function release(client: PoolClient, error: Error): void {
  try {
    client.release(error);
  } catch {
    // already handed back
  }
}
