/**
 * The outbox migrations in a schema of the app's choosing. Not a migration itself: the released classes stay
 * frozen history spelling `public.`; in another schema each is wrapped, and what it sends is moved to that
 * schema on its way to the database. See docs/adr/0503-configurable-schema.md.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import {
  DEFAULT_OUTBOX_SCHEMA,
  outboxNames,
  schemaProblem,
  type OutboxNames,
} from '../model/table-names';
import { outboxMigrations } from './index';

/** A TypeORM migration class, as `DataSource({ migrations })` takes it. */
export type OutboxMigrationClass = new () => MigrationInterface;

/** Options of {@link outboxMigrationsFor}. */
export interface OutboxMigrationsOptions {
  /** The schema, as given to `OutboxModule.forRoot({ schema })`. Default: `'public'`. */
  schema?: string;
}

/**
 * The outbox migrations that build the outbox in `schema` (the one `OutboxModule.forRoot({ schema })` names),
 * for `DataSource({ migrations })`. In `public` they are `outboxMigrations` themselves. In another schema the
 * first one also creates the schema (if missing), and each is named after it — `OutboxCore_billing_1764428400000`
 * — so that TypeORM, which keys the migrations it ran by name, runs them again for a second schema of the same
 * database. Throws `OutboxConfigurationError` for a schema that is not a lower-case identifier.
 */
export function outboxMigrationsFor(options: OutboxMigrationsOptions = {}): OutboxMigrationClass[] {
  const schema = options.schema ?? DEFAULT_OUTBOX_SCHEMA;
  const problem = schemaProblem(schema);
  if (problem !== null)
    throw new OutboxConfigurationError([messages.badOption('schema of outboxMigrationsFor', problem, schema)]);
  if (schema === DEFAULT_OUTBOX_SCHEMA) return [...outboxMigrations];
  const names = outboxNames(schema);
  return outboxMigrations.map((Migration, index) => inSchema(Migration, names, index === 0));
}

/** `OutboxCore1764428400000` in schema `billing` → `OutboxCore_billing_1764428400000` (TypeORM reads the last 13 digits). */
export function migrationNameInSchema(name: string, schema: string): string {
  const timestamp = /\d{13}$/.exec(name)?.[0];
  if (schema === DEFAULT_OUTBOX_SCHEMA || timestamp === undefined) return name;
  return `${name.slice(0, -timestamp.length)}_${schema}_${timestamp}`;
}

/** `Migration` in the schema of `names`; `createsSchema`: its up begins with `create schema if not exists`. */
function inSchema(
  Migration: OutboxMigrationClass,
  names: OutboxNames,
  createsSchema: boolean,
): OutboxMigrationClass {
  const released = new Migration();
  const name = migrationNameInSchema(released.name ?? Migration.name, names.schema);
  const InSchema = class implements MigrationInterface {
    readonly name = name;
    readonly transaction = released.transaction;

    async up(runner: QueryRunner): Promise<void> {
      // left in place by the downs: it may hold more than the outbox, and an app may have made it itself
      if (createsSchema) await runner.query(`create schema if not exists ${names.schemaSql}`);
      await new Migration().up(sendingInSchema(runner, names, name));
    }

    async down(runner: QueryRunner): Promise<void> {
      await new Migration().down(sendingInSchema(runner, names, name));
    }
  };
  Object.defineProperty(InSchema, 'name', { value: name });
  return InSchema;
}

/** `runner`, except that each statement it is given goes to the database moved to the schema of `names`. */
function sendingInSchema(runner: QueryRunner, names: OutboxNames, migration: string): QueryRunner {
  return new Proxy(runner, {
    get(target, key) {
      if (key === 'query') {
        return (text: string, ...rest: unknown[]) =>
          (target.query as (...args: unknown[]) => Promise<unknown>)(
            sqlInSchema(text, names, migration),
            ...rest,
          );
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * A released migration's statement moved from `public` to the schema of `names`: every `public.` that
 * qualifies a name (tables, functions, policies' tables — function bodies and `execute` strings included),
 * `schema public` (its grants) and the `search_path` of the SECURITY DEFINER functions. `from public` — the
 * PUBLIC pseudo-role that `revoke` names — stays. Any other `public` is an error naming the migration: a new
 * migration spelled in a way this does not know must be taught here, not moved by guess.
 */
export function sqlInSchema(text: string, names: OutboxNames, migration: string): string {
  const moved = text
    .replace(/\bpublic\.(?=[a-z_])/g, `${names.schemaSql}.`)
    .replace(/\bschema public\b/g, `schema ${names.schemaSql}`)
    .replace(/\bsearch_path = pg_catalog, public\b/g, `search_path = pg_catalog, ${names.schemaSql}`);
  const unknown = moved.replace(/\bfrom public\b(?!\.)/g, '').match(/.{0,30}\bpublic\b.{0,30}/);
  if (unknown)
    throw new OutboxConfigurationError([messages.unknownPublicInMigration(migration, unknown[0].trim())]);
  return moved;
}
