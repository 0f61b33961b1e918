import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';

/**
 * Gives one handler call an EntityManager inside the batch transaction, and opens a savepoint for it only when
 * the handler first sends a query. Handlers that never touch the database cost no round trip; those that do can
 * be rolled back alone when they throw, without undoing the other handlers of the batch.
 */
export class HandlerScope {
  private savepoint: string | null = null;
  private opening: Promise<void> | null = null;
  private settled = false;
  private scopedManager: EntityManager | null = null;

  constructor(
    private readonly dataSource: DataSource,
    private readonly runner: QueryRunner,
    private readonly savepointName: string,
    private readonly consumer: string,
  ) {}

  /** The manager handed to the handler; created on first access. */
  get manager(): EntityManager {
    this.scopedManager ??= this.dataSource.createEntityManager(this.scopedRunner());
    return this.scopedManager;
  }

  /** Keeps the handler's writes (releases its savepoint, if any). Throws when the transaction is aborted. */
  async commit(): Promise<void> {
    this.settled = true;
    await this.opening;
    if (this.savepoint) await this.runner.query(`release savepoint ${this.savepoint}`);
  }

  /** Undoes the handler's writes (rolls back to its savepoint, if any). */
  async rollback(): Promise<void> {
    this.settled = true;
    await this.opening?.catch(() => undefined);
    if (this.savepoint) await this.runner.query(`rollback to savepoint ${this.savepoint}; release savepoint ${this.savepoint}`);
  }

  private async open(): Promise<void> {
    if (this.settled) throw new OutboxError(messages.managerAfterSettle(this.consumer));
    if (!this.opening) {
      this.opening = this.runner.query(`savepoint ${this.savepointName}`).then(() => {
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
            return target.query(...args);
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
