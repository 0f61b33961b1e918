import type { QueryRunner } from 'typeorm';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { outboxNames } from '../model/table-names';
import { outboxMigrations } from './index';
import { migrationNameInSchema, outboxMigrationsFor, sqlInSchema } from './outbox-migrations.factory';

/** What a migration sends: a runner that writes its statements down. */
async function sent(migration: { up(q: QueryRunner): Promise<void> }): Promise<string[]> {
  const statements: string[] = [];
  const runner = { query: async (text: string) => void statements.push(text) };
  await migration.up(runner as unknown as QueryRunner);
  return statements;
}

describe('outboxMigrationsFor', () => {
  it('is outboxMigrations itself in public (and by default)', () => {
    expect(outboxMigrationsFor()).toEqual(outboxMigrations);
    expect(outboxMigrationsFor({ schema: 'public' })).toEqual(outboxMigrations);
  });

  it('names each migration of another schema after it, keeping the 13-digit timestamp TypeORM reads last', () => {
    const released = outboxMigrations.map((M) => new M().name!);
    const names = outboxMigrationsFor({ schema: 'billing' }).map((M) => new M().name!);
    expect(names[0]).toBe('OutboxCore_billing_1764428400000');
    expect(names.map((name) => name.slice(-13))).toEqual(released.map((name) => name.slice(-13)));
    expect(new Set([...names, ...released]).size).toBe(names.length + released.length);
    expect(outboxMigrationsFor({ schema: 'billing' })[0]!.name).toBe('OutboxCore_billing_1764428400000');
  });

  it('creates the schema first, then sends what the released migration sends, moved to the schema', async () => {
    const [Core] = outboxMigrationsFor({ schema: 'billing' });
    const [ReleasedCore] = outboxMigrations;
    const released = await sent(new ReleasedCore!());
    const moved = await sent(new Core!());
    expect(moved[0]).toBe('create schema if not exists "billing"');
    expect(moved.slice(1)).toEqual(
      released.map((text) => sqlInSchema(text, outboxNames('billing'), 'OutboxCore_billing_1764428400000')),
    );
    expect(moved.slice(1).join('\n')).not.toMatch(/\bpublic\b/);
  });

  it('refuses a schema that is not a lower-case identifier, saying what it takes', () => {
    expect(() => outboxMigrationsFor({ schema: 'Billing' })).toThrow(OutboxConfigurationError);
    expect(() => outboxMigrationsFor({ schema: 'Billing' })).toThrow(
      /schema of outboxMigrationsFor must be a lower-case PostgreSQL identifier.*got "Billing"/,
    );
  });

  it('leaves a name without a timestamp, and every name in public, as it is', () => {
    expect(migrationNameInSchema('OutboxCore1764428400000', 'public')).toBe('OutboxCore1764428400000');
    expect(migrationNameInSchema('NoTimestamp', 'billing')).toBe('NoTimestamp');
  });
});

describe('sqlInSchema', () => {
  const billing = outboxNames('billing');
  const move = (text: string): string => sqlInSchema(text, billing, 'Test1764428400000');

  it.each([
    ['a qualified table', 'alter table public.event_outbox add x int', 'alter table "billing".event_outbox add x int'],
    [
      "a function body's search path",
      'security definer set search_path = pg_catalog, public as $$ select 1 from public.event_outbox $$',
      'security definer set search_path = pg_catalog, "billing" as $$ select 1 from "billing".event_outbox $$',
    ],
    [
      'a grant on the schema',
      'grant usage on schema public to outbox_app',
      'grant usage on schema "billing" to outbox_app',
    ],
    [
      'a name inside an execute string',
      "execute 'grant maintain on table public.outbox_event_leases to outbox_relay'",
      `execute 'grant maintain on table "billing".outbox_event_leases to outbox_relay'`,
    ],
    [
      'the PUBLIC role, which stays',
      'revoke all on function public.f(integer) from public',
      'revoke all on function "billing".f(integer) from public',
    ],
  ])('moves %s', (_, text, expected) => {
    expect(move(text)).toBe(expected);
  });

  it('refuses a public it cannot place, naming the migration', () => {
    expect(() => move('alter default privileges in public grant select on tables to r')).toThrow(
      /migration Test1764428400000 sends ".*in public grant.*"/,
    );
  });
});
