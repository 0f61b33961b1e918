import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { OutboxTestKit } from 'nestjs-pg-outbox/testing';
import { AppModule } from './app.module.js';
import { ContactsService } from './contacts/contacts.service.js';

const TENANT = '7d0f2a43-5a8e-4c2b-9d0e-1f2a3b4c5d6e';

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Boots the app, writes one committed and one rolled-back contact, waits for the relay, closes, reports. */
async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  const dataSource = app.get(DataSource);
  await dataSource.query(`create table if not exists contacts (id uuid primary key default gen_random_uuid(),
    tenant_id uuid not null, name text not null)`);
  await dataSource.query(`create table if not exists contact_activity (event_id uuid primary key,
    contact_id uuid not null, summary text not null)`);
  const contacts = app.get(ContactsService);

  const contactId = await contacts.create(TENANT, 'Ada');
  const rolledBack = await contacts.create(TENANT, 'Grace', true).then(
    () => 'committed',
    (error: Error) => error.message,
  );
  // the test kit, from the package's testing entry: the committed event, then its delivery (the relay drives)
  const outbox = OutboxTestKit.for(app);
  const event = await outbox.expectEnqueued('crm.contact.created.v1', { contactId });
  await outbox.waitForDelivery(event.eventId, 'contact-timeline', { timeoutMs: 20_000 });
  const activity: { contact_id: string; summary: string }[] = await dataSource.query(
    'select contact_id, summary from contact_activity',
  );
  const [events] = await dataSource.query(
    `select count(*)::int as all, count(*) filter (where status = 'published')::int as published from event_outbox`,
  );
  const [contactRows] = await dataSource.query('select count(*)::int as n from contacts');
  const url = process.env.DATABASE_URL;
  await app.close();

  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const openConnections = await waitFor('the app connections to close', async () => {
    const [row] = (
      await client.query(
        `select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and pid <> $1`,
        [Number(process.env.OBSERVER_PID ?? 0)],
      )
    ).rows;
    return row.n === 0 ? 0 : undefined;
  }).catch(() => -1);
  await client.end();

  const result = {
    rolledBack,
    summaries: activity.map((row) =>
      row.contact_id === contactId ? row.summary : `wrong contact ${row.contact_id}`,
    ),
    events,
    contacts: contactRows.n,
    openConnections,
  };
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
