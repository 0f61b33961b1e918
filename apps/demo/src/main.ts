import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { join } from 'node:path';
import { resolveDatabase } from '../../../tools/database-url';
import { AppModule } from './app.module';

/** Starts the demo: an embedded PostgreSQL unless DATABASE_URL is set, migrations, then the HTTP API on PORT. */
async function main(): Promise<void> {
  const logger = new Logger('Demo');
  const database = await resolveDatabase({
    persistentDir: join(process.cwd(), '.data', 'demo-postgres'),
    log: (line) => logger.debug(line),
  });
  logger.log(
    database.embedded
      ? `embedded PostgreSQL ${database.embedded.version} at ${database.url}`
      : 'using DATABASE_URL',
  );
  const app = await NestFactory.create(AppModule.forRoot(database.url));
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1');
  logger.log(
    `demo CRM on http://127.0.0.1:${port} — try: curl -XPOST localhost:${port}/contacts -H 'content-type: application/json' -d '{"name":"Ada","email":"ada@example.com"}'`,
  );
  let closing = false;
  const shutdown = async (): Promise<void> => {
    if (closing) return;
    closing = true;
    await app.close();
    await database.stop();
    process.exit(0);
  };
  const onSignal = (): void => {
    shutdown().catch(fail);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

function fail(error: unknown): never {
  console.error(error);
  process.exit(1);
}

main().catch(fail);
