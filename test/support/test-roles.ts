import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { runSql } from './template-database';
import { adminUrl, type TestDatabase } from './test-database';

/**
 * A login role for one spec file: a member of `outbox_app` or `outbox_relay` (created by the migrations), neither
 * superuser nor owner of anything, so row-level security applies to it. Roles are cluster-wide: the name is
 * unique per run, and `drop()` removes it (after the database, which holds its grants, was dropped).
 */
export interface TestRole {
  name: string;
  /** The test database's URL, connecting as this role (trust authentication on the test servers). */
  url: string;
  /** Runs SQL as this role on a connection of its own, closed afterwards. */
  sql<T = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/** Creates the role, grants it `grants` (SQL run as superuser in the test database), and returns a handle. */
export async function createLoginRole(
  db: TestDatabase,
  memberOf: 'outbox_app' | 'outbox_relay',
  grants: string[] = [],
): Promise<TestRole> {
  const name = `${memberOf}_t_${randomBytes(4).toString('hex')}`;
  // inherit: the grants and policies name outbox_app / outbox_relay, and apply to their members.
  await onServer(`create role ${name} login nosuperuser nocreatedb nocreaterole inherit in role ${memberOf}`);
  for (const grant of grants) await db.sql(grant.replaceAll('$ROLE', name));
  const parsed = new URL(db.url);
  parsed.username = name;
  parsed.password = '';
  const url = parsed.toString();
  return {
    name,
    url,
    sql: async <T>(text: string, values?: unknown[]) => {
      const client = new Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query(text, values)).rows as T[];
      } finally {
        await client.end();
      }
    },
    drop: () => onServer(`drop role if exists ${name}`),
  };
}

function onServer(text: string): Promise<void> {
  return runSql(adminUrl(), [text]);
}
