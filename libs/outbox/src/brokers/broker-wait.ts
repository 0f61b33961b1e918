/** Waiting with deadlines, shared by the forwarders' publishers. */
import type { OutboxTransportOutcome } from '../model/outbox-transport.interface';

/**
 * The outcome of each acknowledgement (message `i` is settled by `acks[i]`, which never rejects), as far as they
 * came by the deadline or the signal's abort; a message still waiting then gets `missing(i)`.
 */
export async function acknowledged(
  acks: readonly Promise<OutboxTransportOutcome>[],
  deadline: number,
  signal: AbortSignal,
  missing: (index: number) => OutboxTransportOutcome,
): Promise<OutboxTransportOutcome[]> {
  const outcomes = new Array<OutboxTransportOutcome | undefined>(acks.length);
  const settled = acks.map((ack, i) => ack.then((outcome) => void (outcomes[i] = outcome)));
  const waited = until(deadline, signal);
  await Promise.race([Promise.all(settled), waited.promise]);
  waited.cancel();
  return outcomes.length === 0 ? [] : Array.from(outcomes, (outcome, i) => outcome ?? missing(i));
}

/** Resolves at the deadline, or when the signal aborts; `cancel` lets go of the timer. */
export function until(deadline: number, signal: AbortSignal): { promise: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
    onAbort = () => resolve();
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return {
    promise,
    cancel: () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * `work`, or a rejection after `ms`; what `work` gives after that is handed to `dispose` (a connection that
 * opened too late is closed, not leaked).
 */
export async function withTimeout<T>(
  work: Promise<T>,
  ms: number,
  what: string,
  dispose: (late: T) => unknown = () => undefined,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          timedOut = true;
          reject(new Error(`${what} took over ${ms} ms`));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (timedOut) work.then(dispose, () => undefined);
  }
}

/** The URL without its password, for logs. */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}
