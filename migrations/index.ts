import { OutboxCore1764428400000 } from './1764428400000-outbox-core';
import { OutboxTenancy1764428600000 } from './1764428600000-outbox-tenancy';

/** The outbox migrations in order, for `DataSource({ migrations })`. */
export const outboxMigrations = [OutboxCore1764428400000, OutboxTenancy1764428600000];
