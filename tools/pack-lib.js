#!/usr/bin/env node
/**
 * `npm run pack:lib`: builds the library, writes its tarball to dist/pack/ and prints the tarball's absolute
 * path as the last line (scripts and the outside-app test read it from there).
 */
const { execFileSync } = require('node:child_process');
const { copyFileSync, mkdirSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const lib = join(root, 'libs', 'outbox');
const destination = join(root, 'dist', 'pack');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

execFileSync(npm, ['run', 'build'], { cwd: lib, stdio: ['ignore', 'inherit', 'inherit'] });
// The package's README is the repository's front door; the copy is not committed (libs/outbox/.gitignore).
copyFileSync(join(root, 'README.md'), join(lib, 'README.md'));
mkdirSync(destination, { recursive: true });
const output = execFileSync(npm, ['pack', '--json', '--pack-destination', destination], {
  cwd: lib,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [packed] = JSON.parse(output);
process.stdout.write(`${packed.files.length} files, ${packed.size} bytes packed (${packed.unpackedSize} unpacked)\n`);
process.stdout.write(`${join(destination, packed.filename)}\n`);
