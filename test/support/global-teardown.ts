/** Drops the template database and stops the embedded PostgreSQL started by global-setup (if any). */
export default async function globalTeardown(): Promise<void> {
  const state = globalThis as {
    __outboxTemplate__?: { drop(): Promise<void> };
    __outboxDatabase__?: { stop(): Promise<void> };
  };
  try {
    await state.__outboxTemplate__?.drop();
  } finally {
    await state.__outboxDatabase__?.stop();
  }
}
