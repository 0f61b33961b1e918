/**
 * The data source TypeORM's CLI runs the demo's migrations with, as an app does in production instead of
 * `migrationsRun` at start: `npm run migration:show`, `npm run migration:run`, `npm run migration:revert`
 * (`typeorm migration:run -d migrations/data-source.ts`), against the database `DATABASE_URL` names.
 */
import { DataSource } from 'typeorm';
import { demoMigrations } from './index';

const url = process.env.DATABASE_URL?.trim();
if (!url) {
  // No default: a migration run against a database nobody named is worse than none. The demo's embedded
  // PostgreSQL (`npm start` without DATABASE_URL) runs these same migrations itself when it starts.
  throw new Error('DATABASE_URL is not set: name the database to migrate, e.g. DATABASE_URL=postgres://…');
}

export default new DataSource({
  type: 'postgres',
  url,
  migrations: demoMigrations,
});
