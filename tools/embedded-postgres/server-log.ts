import { readFile, rename, stat } from 'node:fs/promises';

/** The server log, inside the data folder so that it lives exactly as long as the cluster. */
export const SERVER_LOG = 'embedded-postgres.log';
/** A persistent cluster's log is set aside at start past this size, so that it cannot grow forever. */
export const MAX_LOG_BYTES = 16 * 1024 * 1024;

export async function fileSize(path: string): Promise<number> {
  return (await stat(path).catch(() => null))?.size ?? 0;
}

export async function setAsideLargeLog(logFile: string): Promise<void> {
  if ((await fileSize(logFile)) > MAX_LOG_BYTES) await rename(logFile, `${logFile}.old`);
}

/** The last lines the server logged since byte `from`. */
export async function readLogTail(logFile: string, from: number): Promise<string> {
  const content = await readFile(logFile).catch(() => null);
  if (content === null) return '(no server log was written)';
  return logTail(content, from);
}

/** The last 30 lines of `content` past byte `from` (a log written before this start is not ours to show). */
export function logTail(content: Buffer, from: number): string {
  return lastLines(content.subarray(Math.min(from, content.length)).toString('utf8'), 30) || '(empty)';
}

export function lastLines(text: string, count: number): string {
  return text.trimEnd().split('\n').slice(-count).join('\n');
}
