import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Options } from '@swc/core';

/**
 * The TypeScript that test processes of their own run (relay children, child apps), compiled once per jest run by
 * global-setup instead of once per process: `@swc-node/register` loads the `typescript` package and reads
 * tsconfig.json in every process it starts (about 0.45 s of CPU each), and the suite starts hundreds of them.
 * The build is one JSON map (source path → CommonJS) and a require hook, children-register.ts compiled, that serves
 * it; a `.ts` file the map lacks is compiled by the hook when loaded. Module resolution is Node's, unchanged: the
 * workspace package still resolves to its source through the `@nestjs-pg-outbox/source` export condition.
 */
export const CHILD_REGISTER_ENV = 'OUTBOX_TEST_CHILD_REGISTER';

/** What compiled.json holds: swc's path and options (for the files the build lacks), the compiled files by path. */
export interface ChildrenBuild {
  swc: string;
  options: Options;
  compiled: Record<string, string>;
}

const ROOT = join(__dirname, '..', '..');
/** What children load: the library's source, the test helpers and child scripts, the tools they import. */
const SOURCES = ['libs/outbox/src', 'test', 'tools'];
const LEFT_OUT = new Set(['node_modules', 'dist', 'types', 'fixtures', 'outside-app', 'quick-start']);
const NOT_LOADED = /\.(spec|e2e-spec|fault-spec|d)\.ts$/;

/**
 * The swc options `@swc-node/register` derives from tsconfig.json (target ES2022, legacy decorators with
 * metadata, define semantics for class fields, CommonJS with interop), less the source maps.
 */
export function childSwcOptions(filename: string): Options {
  return {
    filename,
    swcrc: false,
    isModule: true,
    sourceMaps: false,
    jsc: {
      target: 'es2022',
      externalHelpers: false,
      keepClassNames: true,
      parser: { syntax: 'typescript', decorators: true, dynamicImport: true },
      transform: {
        legacyDecorator: true,
        decoratorMetadata: true,
        useDefineForClassFields: true,
      },
    },
    module: { type: 'commonjs', noInterop: false, ignoreDynamic: false },
  };
}

function sourceFiles(folder: string, into: string[]): string[] {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) {
      if (!LEFT_OUT.has(entry.name)) sourceFiles(path, into);
    } else if (entry.name.endsWith('.ts') && !NOT_LOADED.test(entry.name)) {
      into.push(path);
    }
  }
  return into;
}

/**
 * Compiles what children load into a new temporary folder; returns the path of its require hook. (swc is imported
 * here, not at the top: the specs import this module for CHILD_REGISTER_ENV only.)
 */
export async function buildForChildren(): Promise<string> {
  const { transformSync } = await import('@swc/core');
  const folder = mkdtempSync(join(tmpdir(), 'outbox-test-children-'));
  const compiled: Record<string, string> = {};
  for (const path of SOURCES.flatMap((source) => sourceFiles(join(ROOT, source), [])))
    compiled[path] = transformSync(readFileSync(path, 'utf8'), childSwcOptions(path)).code;
  const hook = join(__dirname, 'children-register.ts');
  const swc = createRequire(__filename).resolve('@swc/core');
  const build: ChildrenBuild = { swc, options: childSwcOptions(''), compiled };
  writeFileSync(join(folder, 'compiled.json'), JSON.stringify(build));
  writeFileSync(
    join(folder, 'register.js'),
    transformSync(readFileSync(hook, 'utf8'), childSwcOptions(hook)).code,
  );
  return join(folder, 'register.js');
}

/** Removes what buildForChildren wrote (given its hook's path). */
export function removeChildrenBuild(register: string): void {
  rmSync(join(register, '..'), { recursive: true, force: true });
}
