import { Client, type PoolClient } from 'pg';
import { sendAll, setPipeline } from '../../libs/outbox/src/store/pipeline';
import { setTransactionContext } from '../../libs/outbox/src/store/sql';
import { adminUrl } from '../support/test-database';

describe("the relay's statements whose rows no caller reads (rowsUnread)", () => {
  // no table is read or written, and every setting is transaction-local: the server's own database serves
  let client: Client;

  beforeAll(async () => {
    client = new Client({ connectionString: adminUrl() });
    await client.connect();
    // as the relay's rounds send: written without waiting for the answers before
    setPipeline(client as unknown as PoolClient, true);
  });

  afterAll(async () => {
    await client.end();
  });

  const connection = (): PoolClient => client as unknown as PoolClient;

  it('runs a transaction context without building its row, its settings in force after it', async () => {
    const context = setTransactionContext('app.tenant', '00000000-0000-0000-0000-0000000000a1', 5000);
    expect(context.rowsUnread).toBe(true);
    const [begun, set, read, ended] = await sendAll(connection(), [
      { statement: { text: 'begin', values: [] } },
      { statement: context },
      {
        statement: {
          text: `select current_setting('app.tenant') as tenant, current_setting('statement_timeout') as timeout`,
          values: [],
        },
      },
      { statement: { text: 'commit', values: [] } },
    ]);
    expect(begun!.command).toBe('BEGIN');
    expect(set!.command).toBe('SELECT');
    expect(set!.rows).toEqual([]);
    expect(read!.rows).toEqual([{ tenant: '00000000-0000-0000-0000-0000000000a1', timeout: '5s' }]);
    expect(ended!.command).toBe('COMMIT');
  });

  it('gives the row of the same statement without the flag', async () => {
    const { rowsUnread: _unread, ...context } = setTransactionContext('app.tenant', 'b', 5000);
    const [, set] = await sendAll(connection(), [
      { statement: { text: 'begin', values: [] } },
      { statement: context },
      { statement: { text: 'rollback', values: [] } },
    ]);
    expect(set!.rows).toHaveLength(1);
  });

  it("rejects with the statement's error when a context fails", async () => {
    const context = {
      ...setTransactionContext('no_dot_setting', 'c', 5000),
      values: ['', 'c', '5000', 'on'],
    };
    await expect(
      sendAll(connection(), [
        { statement: { text: 'begin', values: [] } },
        { statement: context },
        { statement: { text: 'rollback', values: [] } },
      ]),
    ).rejects.toThrow(/parameter/i);
  });
});
