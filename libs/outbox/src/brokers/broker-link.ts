import { OutboxError } from '../errors/outbox.error';
import { errorText } from '../errors/error-text';

/** No connection to the broker now; `retryAfterMs` says when the next attempt to open one may go. */
export class BrokerUnavailableError extends OutboxError {
  constructor(
    message: string,
    readonly retryAfterMs: number,
    /** What the last attempt to connect failed with. */
    readonly reason: unknown,
  ) {
    super(message);
  }
}

/**
 * One connection to a broker, opened on first use and again after it dropped; an attempt that fails makes the
 * next wait (doubling from `baseMs` to `capMs`), and callers meanwhile get a {@link BrokerUnavailableError} at
 * once rather than a connection attempt each. Concurrent callers share one attempt.
 */
export class BrokerLink<C> {
  private current: C | null = null;
  private opening: Promise<C> | null = null;
  private failures = 0;
  private retryAt = 0;
  private lastError: unknown = null;
  private closed = false;

  constructor(
    private readonly label: string,
    private readonly open: (lost: () => void) => Promise<C>,
    private readonly shut: (connection: C) => Promise<void>,
    private readonly backoff: { baseMs: number; capMs: number },
    private readonly now: () => number = Date.now,
  ) {}

  /** The open connection, or one being opened now; throws {@link BrokerUnavailableError} while backing off. */
  async get(): Promise<C> {
    if (this.closed) throw new BrokerUnavailableError(`${this.label} is closed`, this.backoff.capMs, null);
    if (this.current) return this.current;
    if (this.opening) return this.opening;
    const wait = this.retryAt - this.now();
    if (wait > 0) throw this.unavailable(wait);
    const opening = this.connect();
    this.opening = opening;
    try {
      return await opening;
    } finally {
      this.opening = null;
    }
  }

  /** Closes the connection and refuses new ones. Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    const connection = this.current ?? (await this.opening?.catch(() => null)) ?? null;
    this.current = null;
    if (connection) await this.shut(connection).catch(() => undefined);
  }

  private async connect(): Promise<C> {
    let connection: C | null = null;
    const lost = (): void => {
      if (connection !== null && this.current === connection) this.current = null;
    };
    try {
      connection = await this.open(lost);
    } catch (error) {
      this.failures++;
      this.lastError = error;
      const delay = Math.min(this.backoff.capMs, this.backoff.baseMs * 2 ** Math.min(30, this.failures - 1));
      this.retryAt = this.now() + delay;
      throw this.unavailable(delay);
    }
    if (this.closed) {
      await this.shut(connection).catch(() => undefined);
      throw this.unavailable(this.backoff.capMs);
    }
    this.failures = 0;
    this.current = connection;
    return connection;
  }

  private unavailable(retryAfterMs: number): BrokerUnavailableError {
    return new BrokerUnavailableError(
      `${this.label} is unavailable (${errorText(this.lastError)}); not sent, retried in ${retryAfterMs} ms`,
      retryAfterMs,
      this.lastError,
    );
  }
}
