/** The SQLSTATE of a PostgreSQL error (pg's error, or TypeORM's QueryFailedError, which copies it); else undefined. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
