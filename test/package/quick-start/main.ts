// The README's quick start, run as its last paragraph says (NestFactory.create, listen, the two curl calls), plus
// a rolled-back transaction and a check that app.close() leaves no connection open.
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OutboxService } from 'nestjs-pg-outbox';
import { AppModule } from './app.module';

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const dataSource = app.get(DataSource);

  const created = await fetch(`${base}/contacts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com' }),
  });
  const contact = (await created.json()) as { id: number };
  const rolledBack = await dataSource
    .transaction(async (manager) => {
      await manager.query(`insert into contacts (name, email) values ('Grace', 'grace@example.com')`);
      await app
        .get(OutboxService)
        .enqueue(manager, { eventName: 'crm.contact.created.v1', payload: { contactId: 0 } });
      throw new Error('rolled back on purpose');
    })
    .then(
      () => 'committed',
      (error: Error) => error.message,
    );
  const activities = await waitFor('the relay to deliver', async () => {
    const response = await fetch(`${base}/contacts/${contact.id}/activities`);
    const rows = (await response.json()) as { summary: string }[];
    return rows.length > 0 ? rows : undefined;
  });
  const [events] = await dataSource.query(
    `select count(*)::int as all, count(*) filter (where status = 'published')::int as published from event_outbox`,
  );
  const [contacts] = await dataSource.query('select count(*)::int as n from contacts');
  await app.close();

  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  const openConnections = await waitFor('the app connections to close', async () => {
    const { rows } = await client.query(
      `select count(*)::int as n from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and pid <> $1`,
      [Number(process.env.OBSERVER_PID ?? 0)],
    );
    return rows[0].n === 0 ? 0 : undefined;
  }).catch(() => -1);
  await client.end();

  const result = {
    rolledBack,
    summaries: activities.map((row) => row.summary),
    events,
    contacts: contacts.n,
    openConnections,
  };
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
