/**
 * Which optional packages an app loads: `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register
 * test/support/observability-peers-child.ts`. Env: DATABASE_URL; MODULES, a comma-separated list of `board`,
 * `metrics`, `tracing` to import beside OutboxModule. Boots the app, enqueues and relays one event, closes, and
 * prints `LOADED <json>`: the optional peer packages found in `require.cache`.
 */
import 'reflect-metadata';
import { Injectable, type DynamicModule } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { OutboxMetricsModule, OutboxTracingModule } from 'nestjs-pg-outbox/observability';
import { buildApp } from './build-app';

@Injectable()
class NoteConsumer {
  @OnOutboxEvent('test.note.v1', { consumer: 'note' })
  handle(_event: OutboxEvent): void {}
}

const OPTIONAL = ['prom-client', '@opentelemetry/api', '@opentelemetry/sdk-trace-base', 'playwright-core'];

async function main(): Promise<void> {
  const modules = (process.env.MODULES ?? '').split(',').filter(Boolean);
  const imports: DynamicModule[] = [];
  if (modules.includes('board'))
    imports.push(OutboxBoardModule.forRoot({ allowUnguarded: true, tenants: () => 'all' }));
  if (modules.includes('metrics')) imports.push(OutboxMetricsModule.forRoot());
  if (modules.includes('tracing')) imports.push(OutboxTracingModule.forRoot());
  const t = await buildApp({ url: process.env.DATABASE_URL!, providers: [NoteConsumer], imports });
  await t.dataSource.transaction((m) =>
    t.outbox.enqueue(m, {
      tenantId: '00000000-0000-4000-8000-000000000009',
      eventName: 'test.note.v1',
      payload: {},
    }),
  );
  const { succeeded } = await t.relay.drain();
  await t.close();
  const loaded = OPTIONAL.filter((pkg) =>
    Object.keys(require.cache).some((path) => path.includes(`/node_modules/${pkg}/`)),
  );
  process.stdout.write(`DELIVERED ${succeeded}\nLOADED ${JSON.stringify(loaded)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${String(error?.stack ?? error)}\n`);
  process.exit(1);
});
