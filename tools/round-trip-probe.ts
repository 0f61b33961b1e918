/**
 * Sees every statement a TypeORM DataSource's pg pool sends, at the driver (the relay writes its statements on
 * the pg connection itself, in pipeline mode, not through TypeORM's `query()`), and counts round trips: a
 * statement written while an earlier one on the same pipelined connection still waits for its result travels
 * with it; on a connection not in pipeline mode every statement is a round trip of its own. For tests and the
 * benchmark; it wraps the `query` of each pooled connection the first time the pool hands it out.
 */
import type { Pool, PoolClient, QueryConfig } from 'pg';
import type { DataSource } from 'typeorm';

/** One statement as the driver was given it. */
export interface ProbedStatement {
  text: string;
  values: readonly unknown[];
  /** The statement's name (a named statement, parsed once per connection). */
  name?: string;
  /** The round trip it travelled in (numbered from 1 since the probe was attached or last taken). */
  trip: number;
  /** Milliseconds from being written to its result. */
  ms: number;
  /** When it was written (`performance.now()`). */
  sentAt: number;
}

export class RoundTripProbe {
  private statements: ProbedStatement[] = [];
  private trips = 0;
  private readonly inFlight = new WeakMap<PoolClient, number>();
  private readonly wrapped = new WeakSet<PoolClient>();
  private readonly onAcquire = (client: PoolClient): void => this.wrap(client);

  private constructor(private readonly pool: Pool) {}

  /** Starts watching the pool of `dataSource` (its connections are wrapped as the pool hands them out). */
  static attach(dataSource: DataSource): RoundTripProbe {
    const pool = (dataSource.driver as unknown as { master: Pool }).master;
    const probe = new RoundTripProbe(pool);
    pool.on('acquire', probe.onAcquire);
    return probe;
  }

  /** Stops noting new connections (those wrapped keep being counted). */
  detach(): void {
    this.pool.off('acquire', this.onAcquire);
  }

  /** Statements and round trips since the last `take()`; then counts afresh. */
  take(): { statements: ProbedStatement[]; roundTrips: number } {
    const taken = { statements: this.statements, roundTrips: this.trips };
    this.statements = [];
    this.trips = 0;
    return taken;
  }

  /** Statements so far, without resetting. */
  get seen(): readonly ProbedStatement[] {
    return this.statements;
  }

  private wrap(client: PoolClient): void {
    if (this.wrapped.has(client)) return;
    this.wrapped.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]): unknown => {
      const config = args[0];
      const text = typeof config === 'string' ? config : ((config as QueryConfig | null)?.text ?? '');
      const values =
        (typeof config === 'object' && config !== null ? (config as QueryConfig).values : undefined) ??
        (Array.isArray(args[1]) ? (args[1] as unknown[]) : []);
      const name = typeof config === 'object' && config !== null ? (config as QueryConfig).name : undefined;
      const busy = this.inFlight.get(client) ?? 0;
      if (!client.pipeline || busy === 0) this.trips++;
      const began = performance.now();
      const statement: ProbedStatement = { text, values, trip: this.trips, ms: 0, sentAt: began };
      if (name !== undefined) statement.name = name;
      this.statements.push(statement);
      this.inFlight.set(client, busy + 1);
      const done = (): void => {
        statement.ms = performance.now() - began;
        this.inFlight.set(client, (this.inFlight.get(client) ?? 1) - 1);
      };
      const result = query(...args);
      whenAnswered(result, done);
      return result;
    };
  }
}

/**
 * Calls `done` once a `query` of pg's client is answered: its promise, or, for a query given as pg's own `Query`
 * object (as the relay sends its statements), its callback; at once for anything else.
 */
export function whenAnswered(result: unknown, done: () => void): void {
  const sent = result as { then?: unknown; callback?: (...answer: unknown[]) => void } | undefined;
  if (typeof sent?.then === 'function') (result as Promise<unknown>).then(done, done);
  else if (typeof sent?.callback === 'function') {
    const answered = sent.callback;
    sent.callback = (...answer: unknown[]) => {
      done();
      answered(...answer);
    };
  } else done();
}
