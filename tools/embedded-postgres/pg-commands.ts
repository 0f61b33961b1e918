import type { ShutdownMode } from './embedded-postgres.interface';

/** Seconds pg_ctl waits for a start or a stop before giving up. */
export const PG_CTL_TIMEOUT_S = 60;

/** initdb's arguments: trust authentication for `postgres`, UTF-8, the C locale. */
export function initdbArgs(dataDir: string, throwaway: boolean): string[] {
  const args = ['-D', dataDir, '--auth=trust', '-U', 'postgres', '--encoding=UTF8', '--locale=C'];
  args.push('--no-instructions');
  // A throwaway cluster need not survive an OS crash, so skip initdb's sync. The server keeps fsync on.
  if (throwaway) args.push('--no-sync');
  return args;
}

/** `pg_ctl start`, waiting until the server accepts connections; `flags` is `serverFlags`'s `-o`. */
export function pgCtlStartArgs(dataDir: string, logFile: string, flags: string): string[] {
  return ['start', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-D', dataDir, '-l', logFile, '-o', flags];
}

/** `pg_ctl stop`, waiting until the server is down (or `timeoutS` passed). */
export function pgCtlStopArgs(dataDir: string, mode: ShutdownMode, timeoutS = PG_CTL_TIMEOUT_S): string[] {
  return ['stop', '-w', '-t', String(timeoutS), '-m', mode, '-D', dataDir];
}
