// An app that imports only the core: boots OutboxModule.forRoot (relay off), closes, and prints `LOADED <json>`:
// `booted`, `outbox` (how many entry files of the package the loader holds: 1, so the check sees the package) and
// `loaded`, each file of a feature folder of the package (webhooks, brokers, inbox, admin, board, observability,
// testing) and each feature's package that Node loaded, with the chain of imports that loaded it. None is expected.
// With ALSO_IMPORT=<entries> (comma-separated, e.g. `webhooks,admin`) it also imports those subpaths, so the check
// can be seen to fail. Run in the outside app as dist/core-only.js (CommonJS and ES modules alike: the package is
// CommonJS, so its files are in the CommonJS loader's cache either way) and in this repository on the source
// (test/package/entries.e2e-spec.ts).
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule, OutboxService } from 'nestjs-pg-outbox';
import module from 'node:module';
import { relative } from 'node:path';

/** The package's files: its build in node_modules, or its source in this repository. */
const PACKAGE_FILE = String.raw`(?:[\\/]nestjs-pg-outbox[\\/]dist|[\\/]libs[\\/]outbox[\\/]src)[\\/]`;
const ENTRY_FILE = new RegExp(`${PACKAGE_FILE}index\\.(?:js|ts)$`);
const FEATURE_FILE = new RegExp(
  `${PACKAGE_FILE}(?:.*[\\\\/])?(?:webhooks|brokers|inbox|admin|board|observability|testing)[\\\\/]`,
);
const FEATURE_PACKAGE =
  /[\\/]node_modules[\\/](?:amqplib|@nats-io[\\/][^\\/]+|prom-client|@opentelemetry[\\/][^\\/]+|@nestjs[\\/]terminus|@nestjs[\\/]microservices)[\\/]/;

interface Loaded {
  filename: string;
  parent?: Loaded | null;
}
const cache = (module as unknown as { _cache: Record<string, Loaded> })._cache;

/** `a.js <- b.js <- index.js`: the file, then each file that required it (CommonJS only records the first). */
function chain(path: string): string {
  const links: string[] = [];
  for (let file: Loaded | null | undefined = cache[path]; file && links.length < 12; file = file.parent)
    links.push(relative(process.cwd(), file.filename));
  return links.join(' <- ');
}

@Module({
  imports: [
    ScheduleModule.forRoot(),
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL }),
    OutboxModule.forRoot({ relay: { enabled: false } }),
  ],
})
class CoreOnlyApp {}

async function main(): Promise<void> {
  for (const entry of (process.env.ALSO_IMPORT ?? '').split(',').filter(Boolean))
    await import(`nestjs-pg-outbox/${entry}`);
  const app = await NestFactory.createApplicationContext(CoreOnlyApp, { logger: ['error', 'warn'] });
  const booted = app.get(OutboxService) instanceof OutboxService;
  await app.close();
  const files = Object.keys(cache);
  const loaded = files.filter((path) => FEATURE_FILE.test(path) || FEATURE_PACKAGE.test(path)).map(chain);
  const outbox = files.filter((path) => ENTRY_FILE.test(path)).length;
  process.stdout.write(`LOADED ${JSON.stringify({ booted, outbox, loaded })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
