import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The demo CRM's own tables. */
export class DemoContacts1764428500000 implements MigrationInterface {
  name = 'DemoContacts1764428500000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.contacts (
        id uuid primary key default gen_random_uuid(),
        tenant_id uuid not null,
        name text not null,
        email text not null,
        created_at timestamptz not null default now()
      )`);
    await q.query(`create index contacts_tenant_idx on public.contacts (tenant_id, created_at desc)`);
    await q.query(`
      create table public.contact_activities (
        id bigint generated always as identity primary key,
        tenant_id uuid not null,
        contact_id uuid not null,
        event_id uuid not null,
        summary text not null,
        created_at timestamptz not null default now()
      )`);
    await q.query(
      `create index contact_activities_contact_idx on public.contact_activities (tenant_id, contact_id)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop table if exists public.contact_activities`);
    await q.query(`drop table if exists public.contacts`);
  }
}
