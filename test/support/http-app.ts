import type { AddressInfo } from 'node:net';
import type { DynamicModule, INestApplication, LoggerService, Provider, Type } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule, type OutboxModuleOptions } from 'nestjs-pg-outbox';

const silent: LoggerService = { log: () => undefined, warn: () => undefined, error: () => undefined };

/** A Nest HTTP app (platform-express) listening on a free port of 127.0.0.1. */
export interface HttpTestApp {
  app: INestApplication;
  baseUrl: string;
  close(): Promise<void>;
}

/** Builds the app as a user would (outbox, relay off), plus `imports`, and listens on port 0. */
export async function buildHttpApp(options: {
  url: string;
  imports?: (DynamicModule | Type)[];
  providers?: Provider[];
  outbox?: OutboxModuleOptions;
}): Promise<HttpTestApp> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      ScheduleModule.forRoot(),
      TypeOrmModule.forRoot({ type: 'postgres', url: options.url, extra: { max: 4 } }),
      OutboxModule.forRoot({ ...options.outbox, relay: { enabled: false, ...options.outbox?.relay } }),
      ...(options.imports ?? []),
    ],
    providers: options.providers ?? [],
  })
    .setLogger(silent)
    .compile();
  const app = moduleRef.createNestApplication({ logger: false });
  try {
    await app.listen(0, '127.0.0.1');
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { app, baseUrl: `http://127.0.0.1:${port}`, close: () => app.close() };
}
