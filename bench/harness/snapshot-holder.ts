/**
 * A second connection that holds a `repeatable read` snapshot open (begin; select 1; … nothing until released),
 * as a forgotten console session or a long report would: vacuum may not remove a row deleted or updated after
 * it began, anywhere in the database, while it lasts (issue 39).
 */
import { Client } from 'pg';

/** `application_name` of the holder's connection, to find it in `pg_stat_activity` and in the doctor's report. */
export const SNAPSHOT_HOLDER_NAME = 'bench-snapshot-holder';

export class SnapshotHolder {
  private released: Promise<void> | null = null;

  private constructor(
    private readonly client: Client,
    /** The holder's backend pid. */
    readonly pid: number,
  ) {}

  /** Connects, begins a repeatable-read transaction and takes its snapshot with a first statement. */
  static async hold(url: string): Promise<SnapshotHolder> {
    const client = new Client({ connectionString: url, application_name: SNAPSHOT_HOLDER_NAME });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      await client.query('begin isolation level repeatable read');
      await client.query('select 1');
      return new SnapshotHolder(client, rows[0]!.pid);
    } catch (error) {
      await client.end();
      throw error;
    }
  }

  /** True once {@link release} was called. */
  get isReleased(): boolean {
    return this.released !== null;
  }

  /** Rolls the transaction back and closes the connection; safe to call twice. */
  release(): Promise<void> {
    this.released ??= this.client
      .query('rollback')
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => this.client.end());
    return this.released;
  }
}
