/**
 * The require hook of test processes of their own (children-build.ts): compiled to `register.js` beside the build's
 * `compiled.json`, loaded with `node -r`. It imports nothing but Node's modules (it runs from the temporary folder).
 * A `.ts` file the build holds is run as compiled; one it lacks is compiled with `@swc/core` (the path and options the
 * build names).
 */
import { readFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Options } from '@swc/core';
import type { ChildrenBuild } from './children-build';

interface CompilingModule {
  _compile(code: string, filename: string): void;
}

const build = JSON.parse(readFileSync(join(__dirname, 'compiled.json'), 'utf8')) as ChildrenBuild;
const extensions = (
  Module as unknown as { _extensions: Record<string, (module: CompilingModule, filename: string) => void> }
)._extensions;

extensions['.ts'] = (module, filename) => {
  let code = build.compiled[filename];
  if (code === undefined) {
    const swc = createRequire(__filename)(build.swc) as {
      transformSync(source: string, options: Options): { code: string };
    };
    code = swc.transformSync(readFileSync(filename, 'utf8'), { ...build.options, filename }).code;
  }
  module._compile(code, filename);
};
