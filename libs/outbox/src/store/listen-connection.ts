import { Client, type ClientConfig, type Pool } from 'pg';
import type { DataSource } from 'typeorm';
import { KEEPALIVE_IDLE_MS, type PgClient, type RoundTripDeadline } from './round-trip-deadline';
import { listenWakeup, type OutboxNames } from './sql';

/** What a `ListenConnection` reports until it is closed. */
export interface ListenHandlers {
  /** A wake-up arrived, with its payload. */
  notification(payload: string | undefined): void;
  /** The connection failed, ended or stopped answering; it is of no further use (close it). */
  lost(error: unknown): void;
}

/** Longest time between two checks that the listening connection still answers. */
const CHECK_EVERY_MAX_MS = 30_000;

/**
 * The connection that LISTENs for wake-ups: a pg client of its own, outside the app's pool (a pooled connection
 * would go back to the pool with the LISTEN on it), made as the pool makes its connections — of the pool's
 * `Client` class (TypeORM's `extra: { Client }`: one that picks the primary among several hosts, say) and with
 * its options — so it goes wherever the pool's connections go. TCP keepalive is on unless the pool sets it
 * itself. A LISTEN connection only receives, so a server that stopped answering would go unnoticed: every half
 * `relay.roundTripTimeoutMs` (at most 30 s) it sends its LISTEN again (a no-op for the server), bounded like the
 * relay's round trips; one that gets no reply in time is destroyed and reported `lost`, and the relay listens
 * again on a new one (see `OutboxWakeup`).
 */
export class ListenConnection {
  private readonly client: Client;
  private checks: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    dataSource: DataSource,
    private readonly handlers: ListenHandlers,
    private readonly deadline: RoundTripDeadline,
  ) {
    const pool = (dataSource.driver as unknown as { master: Pool & { Client?: typeof Client } }).master;
    this.client = new (pool.Client ?? Client)(listenConfig(pool.options as ClientConfig, deadline.ms > 0));
    this.client.on('notification', (message) => handlers.notification(message.payload));
    this.client.on('error', (error) => handlers.lost(error));
    this.client.on('end', () => handlers.lost(new Error('connection ended')));
  }

  /** Connects and subscribes to the wake-ups of the outbox in `names`' schema, then checks the connection now and then. */
  async listen(names: OutboxNames): Promise<void> {
    const { text } = listenWakeup(names);
    await this.bounded(async () => {
      await this.client.connect();
      await this.client.query(text);
    });
    if (this.deadline.ms === 0) return;
    const every = Math.min(CHECK_EVERY_MAX_MS, Math.max(1, Math.floor(this.deadline.ms / 2)));
    // the next check is armed once the last one is answered: never two in flight
    const check = (): void => {
      if (this.closed) return;
      this.checks = setTimeout(() => {
        this.bounded(() => this.client.query(text)).then(check, (error) => this.handlers.lost(error));
      }, every);
      this.checks.unref();
    };
    check();
  }

  /** Stops reporting and closes the connection. Never rejects. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.checks) clearTimeout(this.checks);
    this.checks = null;
    this.client.removeAllListeners();
    this.client.on('error', () => undefined);
    await this.client.end().catch(() => undefined);
  }

  private bounded<T>(work: () => Promise<T>): Promise<T> {
    return this.deadline.withinClient(this.client as unknown as PgClient, 'listen', work);
  }
}

/**
 * The pool's options for a client of its own: TCP keepalive on unless the pool says otherwise, the pool's
 * hidden password kept (pg-pool makes it non-enumerable, so a copy would drop it), and, when its checks are
 * bounded (`bounded`), without the pool's `query_timeout`: one shorter than the deadline would fail a check
 * before its deadline, unreported (see `RoundTripDeadline`).
 */
function listenConfig(options: ClientConfig, bounded: boolean): ClientConfig {
  const config: ClientConfig = { ...options };
  if (bounded) delete config.query_timeout;
  if (options.keepAlive === undefined) {
    config.keepAlive = true;
    config.keepAliveInitialDelayMillis = KEEPALIVE_IDLE_MS;
  }
  if (options.password !== undefined)
    Object.defineProperty(config, 'password', {
      value: options.password,
      enumerable: false,
      writable: true,
      configurable: true,
    });
  return config;
}
