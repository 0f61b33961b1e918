#!/usr/bin/env node
import { migrationSql, sqlHeader } from './migration-sql';

const USAGE = `Usage: nestjs-pg-outbox sql [--down] [--no-transaction]

  sql               print the up SQL of every outbox migration, in order, in one transaction
                    (e.g. npx nestjs-pg-outbox sql | psql "$DATABASE_URL")
  --down            print the down SQL instead, newest migration first
  --no-transaction  leave out the surrounding begin/commit (for tools that add their own)

The same SQL ships as numbered files in node_modules/nestjs-pg-outbox/sql/ (NNNN-name.up.sql, .down.sql).
`;

/** `npx nestjs-pg-outbox sql`: prints the migrations as plain SQL, for review or for another migration tool. */
async function main(args: string[]): Promise<number> {
  const [command, ...flags] = args;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined ? 1 : 0;
  }
  const unknown = flags.filter((flag) => flag !== '--down' && flag !== '--no-transaction');
  if (command !== 'sql' || unknown.length > 0) {
    process.stderr.write(
      `nestjs-pg-outbox: unknown ${command !== 'sql' ? `command "${command}"` : `option "${unknown[0]}"`}\n\n${USAGE}`,
    );
    return 2;
  }
  const down = flags.includes('--down');
  const entries = await migrationSql();
  const parts = (down ? [...entries].reverse() : entries).map(
    (entry) => sqlHeader(entry, down ? 'down' : 'up') + (down ? entry.down : entry.up),
  );
  const body = parts.join('\n');
  process.stdout.write(flags.includes('--no-transaction') ? body : `begin;\n\n${body}\ncommit;\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`nestjs-pg-outbox: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
