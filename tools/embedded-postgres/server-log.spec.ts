import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lastLines, logTail, readLogTail } from './server-log';

describe('lastLines', () => {
  it('keeps the last lines, without the trailing newline', () => {
    expect(lastLines('a\nb\nc\n', 2)).toBe('b\nc');
    expect(lastLines('a\nb', 5)).toBe('a\nb');
  });
});

describe('logTail', () => {
  it('shows only what was logged after the offset', () => {
    const log = Buffer.from('old start failure\nLOG:  starting PostgreSQL\nFATAL:  bad setting\n');
    expect(logTail(log, 'old start failure\n'.length)).toBe('LOG:  starting PostgreSQL\nFATAL:  bad setting');
  });

  it('says so when nothing was logged since the offset, even an offset past the end', () => {
    expect(logTail(Buffer.from('abc\n'), 4)).toBe('(empty)');
    expect(logTail(Buffer.from('abc\n'), 1000)).toBe('(empty)');
  });

  it('keeps the last 30 lines of a long log', () => {
    const lines = Array.from({ length: 40 }, (_, i) => `line ${i}`);
    const tail = logTail(Buffer.from(lines.join('\n')), 0).split('\n');
    expect(tail).toEqual(lines.slice(10));
  });
});

describe('readLogTail', () => {
  it('says that no log was written when the file is missing, and reads it when it is there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'outbox-log-spec-'));
    try {
      const file = join(dir, 'server.log');
      expect(await readLogTail(file, 0)).toBe('(no server log was written)');
      writeFileSync(file, 'FATAL:  could not bind\n');
      expect(await readLogTail(file, 0)).toBe('FATAL:  could not bind');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
