/** Stops the embedded PostgreSQL started by global-setup (a no-op with DATABASE_URL). */
export default async function globalTeardown(): Promise<void> {
  const database = (globalThis as { __outboxDatabase__?: { stop(): Promise<void> } }).__outboxDatabase__;
  await database?.stop();
}
