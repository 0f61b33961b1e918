import type { TestDatabase } from './test-database';

/** Tables that belong to the migration tool, not to the schema the migrations build. */
const TOOL_TABLES = ['migrations', 'typeorm_metadata'];

/**
 * A sorted, textual description of what the migrations build in `schema` (default `public`): tables and their
 * columns, constraints, indexes, row-level security and its policies, functions, triggers, sequences and the
 * grants on each, and on the schema. Two databases built the same way print the same snapshot.
 */
export async function catalogSnapshot(
  db: TestDatabase,
  schema = 'public',
): Promise<Record<string, string[]>> {
  const lines = async (text: string): Promise<string[]> =>
    (await db.sql<{ line: string }>(text, text.includes('$2') ? [schema, TOOL_TABLES] : [schema]))
      .map((row) => row.line)
      .sort();
  return {
    tables: await lines(`
      select c.relname || ' ' || c.relkind::text || ' rls=' || c.relrowsecurity || ' force=' || c.relforcerowsecurity
        || ' acl=' || coalesce(array_to_string(array(select unnest(c.relacl)::text order by 1), ','), '') as line
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and c.relkind in ('r', 'p', 'v', 'm', 'S') and c.relname <> all ($2)
        and c.relname not like 'migrations_id_seq%'`),
    columns: await lines(`
      select table_name || '.' || column_name || ' ' || data_type || ' null=' || is_nullable
        || ' default=' || coalesce(column_default, '') || ' identity=' || is_identity
        || ' generated=' || coalesce(generation_expression, '') as line
      from information_schema.columns where table_schema = $1 and table_name <> all ($2)`),
    constraints: await lines(`
      select rel.relname || ' ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
        || ' deferrable=' || con.condeferrable || ' deferred=' || con.condeferred as line
      from pg_constraint con join pg_class rel on rel.oid = con.conrelid
      join pg_namespace n on n.oid = rel.relnamespace
      where n.nspname = $1 and rel.relname <> all ($2)`),
    indexes: await lines(`
      select indexdef as line from pg_indexes where schemaname = $1 and tablename <> all ($2)`),
    policies: await lines(`
      select tablename || ' ' || policyname || ' ' || permissive || ' ' || array_to_string(roles, ',') || ' ' || cmd
        || ' using=' || coalesce(qual, '') || ' check=' || coalesce(with_check, '') as line
      from pg_policies where schemaname = $1 and tablename <> all ($2)`),
    functions: await lines(`
      select pg_get_functiondef(p.oid) || ' acl=' || coalesce(array_to_string(array(select unnest(p.proacl)::text order by 1), ','), '') as line
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1`),
    triggers: await lines(`
      select pg_get_triggerdef(t.oid) as line
      from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and not t.tgisinternal`),
    schemaAcl: await lines(`
      -- a schema whose grants were all revoked again has an explicit ACL equal to the default one
      select array_to_string(coalesce(nspacl, acldefault('n', nspowner)), ',') as line
      from pg_namespace where nspname = $1`),
  };
}
