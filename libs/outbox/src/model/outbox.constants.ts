/** Metadata key under which `@OnOutboxEvent` records a handler. */
export const OUTBOX_HANDLER_METADATA = 'outbox:handler';

/** Name of the transaction-local setting that carries the tenant for row-level security. */
export const DEFAULT_TENANT_SETTING = 'app.current_tenant_id';

/** The nil UUID: a tenant no real one is (the single tenant of `tenancy: 'single'`, the relay's warm-up claim). */
export const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** The tenant used when an app runs with tenancy off. */
export const SINGLE_TENANT_ID = NIL_UUID;

/** A UUID in its canonical text form, any version, either case. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when `value` is a UUID in its canonical text form. */
export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}

/** Control characters (C0 and DEL): refused in names, ids and texts an operator reads. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
export const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
