import { Client } from 'pg';

/**
 * Opens a connection of its own that holds a `repeatable read` snapshot, as a `pg_dump`, a long report or a
 * forgotten `BEGIN` does: from here on no vacuum may remove the rows that later transactions delete or update.
 * Ending the returned client lets the horizon go.
 */
export async function holdSnapshot(url: string): Promise<Client> {
  const holder = new Client({ connectionString: url });
  await holder.connect();
  try {
    await holder.query('begin isolation level repeatable read');
    await holder.query('select 1');
  } catch (error) {
    await holder.end();
    throw error;
  }
  return holder;
}
