import type { TestDatabase } from './test-database';

/** Tables that belong to the migration tool, not to the schema the migrations build. */
const TOOL_TABLES = ['migrations', 'typeorm_metadata'];

/**
 * A sorted, textual description of what the migrations build in `public`: tables and their columns, constraints,
 * indexes, row-level security and its policies, functions, triggers, sequences and the grants on each.
 * Two databases built the same way print the same snapshot.
 */
export async function catalogSnapshot(db: TestDatabase): Promise<Record<string, string[]>> {
  const lines = async (text: string): Promise<string[]> =>
    (await db.sql<{ line: string }>(text, text.includes('$1') ? [TOOL_TABLES] : []))
      .map((row) => row.line)
      .sort();
  return {
    tables: await lines(`
      select c.relname || ' ' || c.relkind::text || ' rls=' || c.relrowsecurity || ' force=' || c.relforcerowsecurity
        || ' acl=' || coalesce(array_to_string(array(select unnest(c.relacl)::text order by 1), ','), '') as line
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'S') and c.relname <> all ($1)
        and c.relname not like 'migrations_id_seq%'`),
    columns: await lines(`
      select table_name || '.' || column_name || ' ' || data_type || ' null=' || is_nullable
        || ' default=' || coalesce(column_default, '') || ' identity=' || is_identity
        || ' generated=' || coalesce(generation_expression, '') as line
      from information_schema.columns where table_schema = 'public' and table_name <> all ($1)`),
    constraints: await lines(`
      select rel.relname || ' ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
        || ' deferrable=' || con.condeferrable || ' deferred=' || con.condeferred as line
      from pg_constraint con join pg_class rel on rel.oid = con.conrelid
      join pg_namespace n on n.oid = rel.relnamespace
      where n.nspname = 'public' and rel.relname <> all ($1)`),
    indexes: await lines(`
      select indexdef as line from pg_indexes where schemaname = 'public' and tablename <> all ($1)`),
    policies: await lines(`
      select tablename || ' ' || policyname || ' ' || permissive || ' ' || array_to_string(roles, ',') || ' ' || cmd
        || ' using=' || coalesce(qual, '') || ' check=' || coalesce(with_check, '') as line
      from pg_policies where schemaname = 'public' and tablename <> all ($1)`),
    functions: await lines(`
      select pg_get_functiondef(p.oid) || ' acl=' || coalesce(array_to_string(array(select unnest(p.proacl)::text order by 1), ','), '') as line
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public'`),
    triggers: await lines(`
      select pg_get_triggerdef(t.oid) as line
      from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and not t.tgisinternal`),
    schemaAcl: await lines(`
      select coalesce(array_to_string(nspacl, ','), '') as line
      from pg_namespace where nspname = 'public'`),
  };
}
