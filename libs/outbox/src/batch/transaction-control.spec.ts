import type { QueryRunner } from 'typeorm';
import { OutboxError } from '../errors/outbox.error';
import { TransactionControl, type QueryArgs } from './transaction-control';

/** A runner that only writes down what reaches it, counting levels as TypeORM does. */
function fakeRunner() {
  const reached: string[] = [];
  const runner = {
    manager: 'the runner’s own manager',
    depth: 1,
    async query(text: string) {
      reached.push(text);
      if (text === 'fail') throw new Error('syntax error');
      return [];
    },
    async startTransaction() {
      reached.push(`start ${++runner.depth}`);
    },
    async commitTransaction() {
      reached.push(`commit ${runner.depth--}`);
    },
    async rollbackTransaction() {
      reached.push(`rollback ${runner.depth--}`);
    },
    async release() {
      reached.push('release');
    },
  };
  return { runner, reached };
}

const WORDS = { refused: (what: string) => `refused ${what}`, leftOpen: () => 'left open' };

function guarded() {
  const { runner, reached } = fakeRunner();
  const control = new TransactionControl(WORDS);
  const sent: { args: QueryArgs; changesSettings: boolean }[] = [];
  const view = control.view(runner as unknown as QueryRunner, {
    send: (target, args, changesSettings) => {
      sent.push({ args, changesSettings });
      return target.query(...(args as [string]));
    },
  });
  return { control, view, runner, reached, sent };
}

describe('TransactionControl', () => {
  it.each(['commit', 'rollback', 'begin', 'select 1; end', 'release savepoint outbox_h1'])(
    'refuses %p in a query, sends nothing, and fails the handler even when it caught the refusal',
    async (text) => {
      const { control, view, reached } = guarded();
      await expect(view.query(text)).rejects.toThrow(OutboxError);
      expect(reached).toEqual([]);
      expect(() => control.settle()).toThrow(/^refused "/);
    },
  );

  it.each(['commitTransaction', 'rollbackTransaction', 'release'] as const)(
    "refuses the runner's %s at the owner's level",
    async (method) => {
      const { control, view, reached } = guarded();
      await expect(view[method]()).rejects.toThrow(`refused queryRunner.${method}()`);
      expect(reached).toEqual([]);
      expect(() => control.settle()).toThrow(OutboxError);
    },
  );

  it('lets the handler open and close levels of its own, and rolls back those it left open', async () => {
    const { control, view, runner, reached } = guarded();
    await view.startTransaction();
    await view.commitTransaction();
    expect(() => control.settle()).not.toThrow();
    await view.startTransaction();
    expect(() => control.settle()).toThrow('left open');
    await control.closeNested(runner as unknown as QueryRunner);
    expect(() => control.settle()).not.toThrow();
    expect(reached).toEqual(['start 2', 'commit 2', 'start 2', 'rollback 2']);
  });

  it('fails the handler for a query that failed, until it rolls back to a savepoint of its own', async () => {
    const { control, view } = guarded();
    await expect(view.query('fail')).rejects.toThrow('syntax error');
    expect(() => control.settle()).toThrow('syntax error');
    await view.query('rollback to savepoint typeorm_1');
    expect(() => control.settle()).not.toThrow();
  });

  it('hands the rest to the owner, saying which statements may change settings', async () => {
    const { view, sent } = guarded();
    await view.query('select $1::int', [1]);
    await view.query(`select set_config('app.current_tenant_id', 'x', true)`);
    expect(sent.map((s) => [s.args[0], s.changesSettings])).toEqual([
      ['select $1::int', false],
      [`select set_config('app.current_tenant_id', 'x', true)`, true],
    ]);
  });

  it("keeps the manager set on the view off the runner's own", () => {
    const { view, runner } = guarded();
    (view as { manager: unknown }).manager = 'the handler’s manager';
    expect(view.manager).toBe('the handler’s manager');
    expect(runner.manager).toBe('the runner’s own manager');
  });
});
