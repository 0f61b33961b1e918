/** Waits until `condition` returns a truthy value (or resolves to one), polling; fails with `message` after `timeoutMs`. */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  {
    timeoutMs = 10_000,
    intervalMs = 20,
    message = 'condition',
  }: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${message}; last value: ${String(last)}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Rejects when `work` has not settled within `ms`: a hang fails the test with `what`, instead of timing it out. */
export function within<T>(ms: number, work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not return within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
