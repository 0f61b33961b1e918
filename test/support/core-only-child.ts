/**
 * What an app that imports only the core ('nestjs-pg-outbox') loads: boots `OutboxModule.forRoot` (relay off)
 * against DATABASE_URL, enqueues one event, closes, and prints `LOADED <json>`: every module of a feature folder of
 * the library (webhooks, brokers, inbox, admin, board, observability, testing) and every feature's package found
 * in `require.cache`, each with the chain of imports that loaded it. With ALSO_IMPORT=<entries> (comma-separated,
 * e.g. `webhooks,admin`) the app also imports those subpaths, so the check can be seen to fail. Run by test/entries.e2e-spec.ts in a process
 * of its own (jest's module registry would hide what Node loaded).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { relative } from 'node:path';
import type { DataSource } from 'typeorm';
import { OutboxModule, OutboxService } from 'nestjs-pg-outbox';

/** A file of a feature folder of the library, in its source or its build. */
const FEATURE_FILE =
  /[\\/]libs[\\/]outbox[\\/](?:src|dist)[\\/](?:.*[\\/])?(webhooks|brokers|inbox|admin|board|observability|testing)[\\/]/;
/** The packages that only the features use. */
const FEATURE_PACKAGE =
  /[\\/]node_modules[\\/](amqplib|@nats-io[\\/][^\\/]+|prom-client|@opentelemetry[\\/][^\\/]+|@nestjs[\\/]terminus|@nestjs[\\/]microservices)[\\/]/;

/** `a.ts <- b.ts <- index.ts`: the file, then who required it, up to the first file outside node_modules. */
function chain(path: string): string {
  const links: string[] = [];
  let module: NodeJS.Module | null | undefined = require.cache[path];
  while (module && links.length < 12) {
    links.push(relative(process.cwd(), module.filename));
    module = module.parent;
  }
  return links.join(' <- ');
}

async function main(): Promise<void> {
  for (const entry of (process.env.ALSO_IMPORT ?? '').split(',').filter(Boolean))
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the entries are chosen at run time
    require(`nestjs-pg-outbox/${entry}`);

  @Module({
    imports: [
      ScheduleModule.forRoot(),
      TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL }),
      OutboxModule.forRoot({ relay: { enabled: false } }),
    ],
  })
  class CoreOnlyApp {}

  const app = await NestFactory.createApplicationContext(CoreOnlyApp, { logger: false, abortOnError: false });
  const dataSource = app.get<DataSource>(getDataSourceToken());
  await dataSource.transaction((manager) =>
    app.get(OutboxService).enqueue(manager, {
      tenantId: '3b1c6a0e-2f4d-4e8a-9c7b-5d6e7f8a9b0c',
      eventName: 'test.core-only.v1',
      payload: {},
    }),
  );
  await app.close();
  const loaded = Object.keys(require.cache)
    .filter((path) => FEATURE_FILE.test(path) || FEATURE_PACKAGE.test(path))
    .map(chain);
  process.stdout.write(`LOADED ${JSON.stringify(loaded)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
