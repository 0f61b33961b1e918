import type { QueryRunner } from 'typeorm';
import { OutboxError } from '../errors/outbox.error';
import { handlerSqlEffects, type HandlerSqlEffects } from './handler-sql';

/** What `QueryRunner.query` takes: a query, its parameters, and whether to answer with a `QueryResult`. */
export type QueryArgs = [query: string, parameters?: unknown[] | object, structured?: boolean];

/** The sentences of a `TransactionControl`'s errors, in the words of the transaction's owner (relay or inbox). */
export interface TransactionControlWords {
  /** The handler tried `what` (a statement, a QueryRunner method), which would end or leave the transaction. */
  refused(what: string): string;
  /** The handler returned with a nested transaction of its own still open. */
  leftOpen(): string;
}

/** What the owner of the transaction does with what a handler may do through the view. */
export interface TransactionControlHooks {
  /**
   * Sends a query of the handler's that neither ends nor leaves the transaction. `changesSettings`: it may change
   * a setting or the role (see `handlerSqlEffects`).
   */
  send(target: QueryRunner, args: QueryArgs, changesSettings: boolean): Promise<unknown>;
  /** Answers a property of the view other than the guarded ones, or undefined for the runner's own. */
  property?(property: string | symbol): { value: unknown } | undefined;
}

/**
 * The guard on a transaction that the outbox owns and lends to a handler as `context.manager` — a relay's batch,
 * the inbox's transaction of one message — and commits with what it records there (the outcomes, the message's
 * record). On the QueryRunner view the handler gets, it refuses what would end or leave that transaction:
 * COMMIT, ROLLBACK, BEGIN and the like in the handler's SQL (see `handlerSqlEffects`), and the runner's
 * `commitTransaction`, `rollbackTransaction` and `release` at the owner's level; the levels a handler opens
 * itself (`manager.transaction()`: savepoints) are its own. A refusal, or a query that failed with no rollback to
 * a savepoint of the handler's since, fails the handler when it returns (`settle`), even if it caught the error.
 * What a handler does past the view (on the driver's connection) is for the owner to find before it commits:
 * see `batchGuard`.
 */
export class TransactionControl {
  /** Transaction levels the handler opened inside the owner's (savepoints) and has not closed. */
  private nested = 0;
  /** A refusal, or a query of the handler that failed and that no rollback to a savepoint undid since. */
  private failure: { error: unknown } | null = null;

  /**
   * `read`: what a handler's SQL does, from its text (`handlerSqlEffects`, or a `HandlerSqlReader`'s `read`,
   * which remembers the texts it read).
   */
  constructor(
    private readonly words: TransactionControlWords,
    private readonly read: (text: string) => HandlerSqlEffects = handlerSqlEffects,
  ) {}

  /**
   * Throws what fails the handler now that it returned: a refusal or a failed query (the transaction may be
   * aborted, the handler's writes incomplete), or a nested transaction it left open.
   */
  settle(): void {
    if (this.failure) throw this.failure.error;
    if (this.nested !== 0) throw new OutboxError(this.words.leftOpen());
  }

  /** Closes the levels the handler left open, through TypeORM, so that its count of levels is the owner's again. */
  async closeNested(runner: QueryRunner): Promise<void> {
    for (; this.nested > 0; this.nested--) await runner.rollbackTransaction();
  }

  /**
   * The QueryRunner a handler's `context.manager` runs on: `runner`, guarded. Its `manager` is kept on the view,
   * so that TypeORM's EntityManager constructor does not replace the runner's own manager.
   */
  view(runner: QueryRunner, hooks: TransactionControlHooks): QueryRunner {
    let manager: unknown;
    const query = (...args: QueryArgs): Promise<unknown> => this.query(runner, args, hooks);
    return new Proxy(runner, {
      get: (target, property, receiver) => {
        if (property === 'query') return query;
        if (property === 'manager') return manager ?? target.manager;
        // The owner's level is the owner's; the levels the handler opens (savepoints, e.g. of
        // manager.transaction()) are the handler's, counted here.
        if (property === 'startTransaction') {
          const start = Reflect.get(target, property, receiver) as (level?: unknown) => Promise<void>;
          return async (level?: unknown) => {
            await start.call(receiver, level);
            this.nested++;
          };
        }
        if (property === 'commitTransaction' || property === 'rollbackTransaction') {
          const close = Reflect.get(target, property, receiver) as () => Promise<void>;
          return async () => {
            if (this.nested === 0) return this.refuse(`queryRunner.${String(property)}()`);
            await close.call(receiver);
            this.nested--;
          };
        }
        if (property === 'release') return () => this.refuse('queryRunner.release()');
        const answer = hooks.property?.(property);
        if (answer) return answer.value;
        return Reflect.get(target, property, receiver) as unknown;
      },
      set: (target, property, value) => {
        if (property === 'manager') {
          manager = value;
          return true;
        }
        return Reflect.set(target, property, value);
      },
    });
  }

  /** Without an `async` layer of its own: a handler's query costs one promise here (ADR 1202). */
  private query(target: QueryRunner, args: QueryArgs, hooks: TransactionControlHooks): Promise<unknown> {
    const text = String(args[0]);
    const { transactionControl, changesSettings } = this.read(text);
    if (transactionControl !== null) return this.refuse(`"${transactionControl}"`);
    let sent: Promise<unknown>;
    try {
      sent = hooks.send(target, args, changesSettings);
    } catch (error) {
      sent = Promise.reject(error as Error); // what it threw, as it would have rejected
    }
    return sent.then(
      (result) => {
        // The handler's own nested transaction rolled back after an error: the transaction is usable again.
        if (ROLLBACK_TO_SAVEPOINT.test(text)) this.failure = null;
        return result;
      },
      (error: unknown) => {
        this.failure = { error };
        throw error;
      },
    );
  }

  /** Refuses what would end or leave the transaction: the handler fails, even when it catches this. */
  private refuse(what: string): Promise<never> {
    const error = new OutboxError(this.words.refused(what));
    this.failure = { error };
    return Promise.reject(error);
  }
}

/** A handler's rollback to a savepoint of its own (see `TransactionControl.query`). */
const ROLLBACK_TO_SAVEPOINT = /^\s*rollback to savepoint/i;
