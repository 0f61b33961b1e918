import { OutboxCore1764428400000 } from './1764428400000-outbox-core';

/** The outbox migrations in order, for `DataSource({ migrations })`. */
export const outboxMigrations = [OutboxCore1764428400000];
