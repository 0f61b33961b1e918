/** The tenant the demo uses when a request names none. */
export const DEMO_TENANT_ID = 'de000000-0000-4000-8000-000000000001';
