#!/usr/bin/env node
import { migrationSql, sqlHeader } from './migration-sql';
import { type OutboxNames, outboxNames, schemaProblem } from '../model/table-names';
import { openDoctorConnection } from '../store/doctor-connection';
import { outboxPartitions, type OutboxPartitionsRow } from '../store/sql/doctor-storage';
import { searchIndexesSql } from '../maintenance/outbox-indexes';
import {
  partitionedLayoutProblem,
  partitionedLayoutSql,
  type PartitionedLayoutOptions,
} from '../maintenance/partitioning';
import { DOCTOR_USAGE, doctorCommand, redacted } from './doctor-command';

const USAGE = `Usage: nestjs-pg-outbox sql [--schema <name>] [--down] [--no-transaction]
       nestjs-pg-outbox sql --search-indexes [--url <url>] [--schema <name>]
       nestjs-pg-outbox sql --partitioned [--width <interval>] [--ahead <n>] [--start <timestamp>] [--schema <name>]
       nestjs-pg-outbox doctor [--url <url>] [--schema <name>] [--json] [--set <threshold>=<warn>,<critical>]

  sql               print the up SQL of every outbox migration, in order, in one transaction
                    (e.g. npx nestjs-pg-outbox sql | psql "$DATABASE_URL")
  --schema <name>   build the outbox in this schema (created if missing) instead of public: the schema
                    given to OutboxModule.forRoot({ schema }) and outboxMigrationsFor({ schema })
  --down            print the down SQL instead, newest migration first
  --no-transaction  leave out the surrounding begin/commit (for tools that add their own)
  --search-indexes  print instead the opt-in indexes of the event search (by name, aggregate, correlation id),
                    built without blocking writes, outside a transaction; each costs every event's insert and
                    status update an index entry (docs/board.md#search)
                    (e.g. npx nestjs-pg-outbox sql --search-indexes | psql "$DATABASE_URL")
  --url <url>       with --search-indexes: read the database's layout first, and print for the partitioned
                    layout the steps that build each index on every partition (docs/partitioning.md)
  --partitioned     print instead the steps that convert event_outbox, outbox_deliveries and consumer_inbox to
                    time ranges of the event id, on a live database (docs/partitioning.md): --width of a range
                    ("1 day" by default, hours or days), --ahead ranges made ahead (3), --start of the first
                    range (by default the first boundary a day ahead; earlier only on empty tables)
                    (e.g. npx nestjs-pg-outbox sql --partitioned | psql -v ON_ERROR_STOP=1 "$DATABASE_URL")

The public SQL ships as numbered files in node_modules/nestjs-pg-outbox/sql/ (NNNN-name.up.sql, .down.sql).

${DOCTOR_USAGE}`;

/** The parsed command line, or the reason it is refused. */
type Parsed =
  | {
      down: boolean;
      transaction: boolean;
      searchIndexes: boolean;
      partitioned: boolean;
      layout: PartitionedLayoutOptions;
      schema?: string;
      url?: string;
    }
  | { problem: string };

function parse(flags: readonly string[]): Parsed {
  const parsed = {
    down: false,
    transaction: true,
    searchIndexes: false,
    partitioned: false,
    layout: {} as PartitionedLayoutOptions,
    schema: undefined as string | undefined,
    url: undefined as string | undefined,
  };
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i]!;
    if (flag === '--down') parsed.down = true;
    else if (flag === '--no-transaction') parsed.transaction = false;
    else if (flag === '--search-indexes') parsed.searchIndexes = true;
    else if (flag === '--partitioned') parsed.partitioned = true;
    else if (flag === '--url') {
      const value = flags[++i];
      if (value === undefined) return { problem: '--url needs a database URL after it' };
      parsed.url = value;
    } else if (flag === '--width' || flag === '--ahead' || flag === '--start') {
      const value = flags[++i];
      if (value === undefined) return { problem: `${flag} needs a value after it (see --partitioned below)` };
      if (flag === '--width') parsed.layout.width = value;
      else if (flag === '--start') parsed.layout.start = value;
      else parsed.layout.ahead = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
    } else if (flag === '--schema' || flag.startsWith('--schema=')) {
      const value = flag === '--schema' ? flags[++i] : flag.slice('--schema='.length);
      if (value === undefined)
        return { problem: '--schema needs a schema name after it, e.g. --schema outbox' };
      const problem = schemaProblem(value);
      if (problem !== null) return { problem: `--schema must be ${problem}, got ${JSON.stringify(value)}` };
      parsed.schema = value;
    } else return { problem: `unknown option "${flag}"` };
  }
  if (parsed.searchIndexes && (parsed.down || !parsed.transaction || parsed.partitioned))
    return {
      problem: '--search-indexes takes only --url and --schema (its statements run outside a transaction)',
    };
  if (parsed.url !== undefined && !parsed.searchIndexes)
    return { problem: '--url goes with --search-indexes' };
  const layoutFlags = Object.keys(parsed.layout).length > 0;
  if (layoutFlags && !parsed.partitioned)
    return { problem: '--width, --ahead and --start go with --partitioned' };
  if (parsed.partitioned && (parsed.down || !parsed.transaction))
    return {
      problem:
        '--partitioned takes only --width, --ahead, --start and --schema (its steps run outside a transaction)',
    };
  const problem = parsed.partitioned ? partitionedLayoutProblem(parsed.layout) : null;
  if (problem !== null) return { problem };
  return parsed;
}

/**
 * `npx nestjs-pg-outbox sql`: prints the migrations as plain SQL, for review or for another migration tool;
 * `npx nestjs-pg-outbox doctor`: checks the outbox's database (see docs/doctor.md).
 */
async function main(args: string[]): Promise<number> {
  const [command, ...flags] = args;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined ? 1 : 0;
  }
  if (command === 'doctor') {
    return doctorCommand(flags, {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
    });
  }
  const parsed: Parsed = command === 'sql' ? parse(flags) : { problem: `unknown command "${command}"` };
  if ('problem' in parsed) {
    process.stderr.write(`nestjs-pg-outbox: ${parsed.problem}\n\n${USAGE}`);
    return 2;
  }
  if (parsed.partitioned) {
    process.stdout.write(partitionedLayoutSql(outboxNames(parsed.schema).schemaSql, parsed.layout));
    return 0;
  }
  if (parsed.searchIndexes) {
    const names = outboxNames(parsed.schema);
    const partitions = parsed.url === undefined ? null : await eventPartitions(parsed.url, names);
    process.stdout.write(searchIndexesSql(names.schemaSql, partitions));
    return 0;
  }
  const { down } = parsed;
  const entries = await migrationSql({ schema: parsed.schema });
  const parts = (down ? [...entries].reverse() : entries).map(
    (entry) => sqlHeader(entry, down ? 'down' : 'up') + (down ? entry.down : entry.up),
  );
  const body = parts.join('\n');
  process.stdout.write(parsed.transaction ? `begin;\n\n${body}\ncommit;\n` : body);
  return 0;
}

/** The leaf partitions of `event_outbox` at `url` in the partitioned layout, else null (read-only). */
async function eventPartitions(url: string, names: OutboxNames): Promise<string[] | null> {
  const connection = await openDoctorConnection(url).catch((error: unknown) => {
    throw new Error(
      `could not read the layout of ${redacted(url)}: ${error instanceof Error ? error.message : String(error)}`,
    );
  });
  try {
    const [row] = await connection.query<OutboxPartitionsRow>(outboxPartitions(names, ['event_outbox']));
    return row?.partitions ?? null;
  } finally {
    await connection.close();
  }
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
