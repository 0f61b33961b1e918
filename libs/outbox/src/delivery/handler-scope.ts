import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';

/** State shared by the scopes of one batch transaction. */
export interface BatchSavepoints {
  /** A savepoint whose handler succeeded; released together with the next `savepoint` (or by the commit). */
  pendingRelease: string | null;
}

/**
 * Gives one handler call an EntityManager inside the batch transaction, and opens a savepoint for it only when
 * the handler first sends a query. Handlers that never touch the database cost no round trip; those that do can
 * be rolled back alone when they throw, without undoing the other handlers of the batch. A succeeded handler's
 * savepoint is released in the same round trip that opens the next one, so a writing handler costs one extra
 * round trip, not two.
 */
export class HandlerScope {
  private savepoint: string | null = null;
  private opening: Promise<void> | null = null;
  private settled = false;
  /** A query of this handler failed and no rollback to a savepoint of its own undid that since. */
  private failedQuery: unknown = null;
  private scopedManager: EntityManager | null = null;

  constructor(
    private readonly dataSource: DataSource,
    private readonly runner: QueryRunner,
    private readonly savepointName: string,
    private readonly consumer: string,
    private readonly batch: BatchSavepoints,
  ) {}

  /** The manager handed to the handler; created on first access. */
  get manager(): EntityManager {
    this.scopedManager ??= this.dataSource.createEntityManager(this.scopedRunner());
    return this.scopedManager;
  }

  /**
   * Keeps the handler's writes. Throws when one of its queries failed and it returned anyway: the transaction may
   * be aborted, and its writes are incomplete; the caller then rolls it back.
   */
  async commit(): Promise<void> {
    this.settled = true;
    await this.opening;
    if (this.failedQuery) throw this.failedQuery;
    if (this.savepoint) this.batch.pendingRelease = this.savepoint;
  }

  /** Undoes the handler's writes (rolls back to its savepoint, if any). */
  async rollback(): Promise<void> {
    this.settled = true;
    await this.opening?.catch(() => undefined);
    if (this.savepoint)
      await this.runner.query(`rollback to savepoint ${this.savepoint}; release savepoint ${this.savepoint}`);
  }

  private async open(): Promise<void> {
    if (this.settled) throw new OutboxError(messages.managerAfterSettle(this.consumer));
    if (!this.opening) {
      const release = this.batch.pendingRelease ? `release savepoint ${this.batch.pendingRelease}; ` : '';
      this.batch.pendingRelease = null;
      this.opening = this.runner.query(`${release}savepoint ${this.savepointName}`).then(() => {
        this.savepoint = this.savepointName;
      });
    }
    await this.opening;
  }

  /**
   * A view of the batch's QueryRunner whose `query` first opens the savepoint. Its `manager` is kept on the
   * view so that TypeORM's EntityManager constructor does not replace the batch runner's own manager.
   */
  private scopedRunner(): QueryRunner {
    let manager: EntityManager | undefined;
    const scope = this;
    return new Proxy(this.runner, {
      get(target, property, receiver) {
        if (property === 'query') {
          return async (...args: Parameters<QueryRunner['query']>) => {
            await scope.open();
            try {
              const result = await target.query(...args);
              // The handler's own nested transaction rolled back after an error: the transaction is usable again.
              if (/^\s*rollback to savepoint/i.test(String(args[0]))) scope.failedQuery = null;
              return result;
            } catch (error) {
              scope.failedQuery = error;
              throw error;
            }
          };
        }
        if (property === 'manager') return manager ?? target.manager;
        // Once the handler settled, report the runner as live so the next query reaches `open()` and fails
        // with our message, instead of TypeORM's about a released runner.
        if (property === 'isReleased' && scope.settled) return false;
        if (property === 'release') return async () => undefined;
        return Reflect.get(target, property, receiver);
      },
      set(target, property, value) {
        if (property === 'manager') {
          manager = value as EntityManager;
          return true;
        }
        return Reflect.set(target, property, value);
      },
    });
  }
}
