import { outboxMigrations } from 'nestjs-pg-outbox';
import type { MigrationInterface } from 'typeorm';
import { DemoContacts1764428500000 } from './1764428500000-demo-contacts';

/** A migration class, as TypeORM's `DataSource({ migrations })` takes it. */
type MigrationClass = new () => MigrationInterface;

/** The demo app's own migrations, oldest first. */
export const appMigrations: MigrationClass[] = [DemoContacts1764428500000];

/**
 * Everything the demo's database needs: the outbox's migrations, then the app's. TypeORM runs them in the order
 * of the timestamps in their names, whatever their order here. The demo runs them at start (`migrationsRun`);
 * `data-source.ts` hands them to TypeORM's CLI (`npm run migration:run`).
 */
export const demoMigrations: MigrationClass[] = [...outboxMigrations, ...appMigrations];
