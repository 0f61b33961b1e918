/** Metadata key under which `@OnOutboxEvent` records a handler. */
export const OUTBOX_HANDLER_METADATA = 'outbox:handler';

/** Name of the transaction-local setting that carries the tenant for row-level security. */
export const DEFAULT_TENANT_SETTING = 'app.current_tenant_id';

/** The tenant used when an app runs with tenancy off. */
export const SINGLE_TENANT_ID = '00000000-0000-0000-0000-000000000000';
