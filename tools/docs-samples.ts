/**
 * Writes the TypeScript blocks of the docs pages that hold compiled samples into `test/types/docs/samples/`, one
 * file per block (its path from the block's first line, `// <path>.ts — …`), for `tsc -p test/types/docs` to
 * compile: the pages cannot show code the package does not accept. A block without a path fails the run.
 * Beside them, `exports-check.ts` imports every name the README and docs/ import or name from each entry of the
 * package (the root and each feature subpath), so a documented name its entry lacks fails the compile.
 * Run by `npm run typecheck`.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, resolve } from 'node:path';
import { documentedExports, exportsCheckSource } from '../test/package/documented-exports';

const ROOT = resolve(__dirname, '..');
/** The pages whose every TypeScript block is a file of one sample app. */
export const SAMPLE_PAGES = ['docs/typed-events.md', 'docs/inbox.md', 'docs/upgrading.md'];
const OUT = join(ROOT, 'test', 'types', 'docs', 'samples');

/** The blocks of a page as files, keyed by path; throws naming a block without a usable path. */
export function sampleFiles(page: string, text: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const match of text.matchAll(/```ts\n([\s\S]*?)```/g)) {
    const path = /^\/\/ ([\w./-]+\.ts)\b/.exec(match[1]!)?.[1];
    const line = text.slice(0, match.index).split('\n').length;
    if (!path || normalize(path).startsWith('..'))
      throw new Error(`${page}:${line}: a ts block must start with "// <file>.ts — …" to be compiled`);
    if (files.has(path)) throw new Error(`${page}:${line}: a second block for ${path}`);
    files.set(path, match[1]!);
  }
  if (files.size === 0) throw new Error(`${page} has no ts blocks`);
  return files;
}

function main(): void {
  rmSync(OUT, { recursive: true, force: true });
  for (const page of SAMPLE_PAGES) {
    const folder = join(OUT, page.replace(/\.md$/, '').replace(/[\\/]/g, '_'));
    for (const [path, source] of sampleFiles(page, readFileSync(join(ROOT, page), 'utf8'))) {
      mkdirSync(dirname(join(folder, path)), { recursive: true });
      writeFileSync(join(folder, path), source);
    }
  }
  writeFileSync(join(OUT, 'exports-check.ts'), exportsCheckSource(documentedExports()));
}

if (require.main === module) main();
