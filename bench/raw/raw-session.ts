/** One `pg` connection for the raw baselines, counting the statements it sends (round trips). */
import { Client, type QueryResultRow } from 'pg';
import type { SqlStatement } from './raw.queries';

export class RawSession {
  /** Statements sent so far. */
  queries = 0;

  private constructor(readonly client: Client) {}

  static async connect(url: string, applicationName: string): Promise<RawSession> {
    const client = new Client({ connectionString: url, application_name: applicationName });
    await client.connect();
    return new RawSession(client);
  }

  async rows<T extends QueryResultRow = Record<string, unknown>>(
    statement: SqlStatement | string,
  ): Promise<T[]> {
    this.queries++;
    const { text, values } = typeof statement === 'string' ? { text: statement, values: [] } : statement;
    return (await this.client.query<T>(text, values)).rows;
  }

  /** Runs `work` between `begin` and `commit`; rolls back and rethrows on error. */
  async transaction<T>(work: () => Promise<T>): Promise<T> {
    await this.rows('begin');
    try {
      const result = await work();
      await this.rows('commit');
      return result;
    } catch (error) {
      await this.rows('rollback').catch(() => undefined);
      throw error;
    }
  }

  async end(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}
