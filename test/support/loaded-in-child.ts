import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { TYPESCRIPT_NODE_ARGS } from './child-relay';

/**
 * Runs a child app script (a path from the repository's root) on the library's source in a fresh process (jest's
 * own module registry would hide what Node loaded) and returns the JSON it prints on its `LOADED <json>` line;
 * throws with its output if it fails.
 */
export function loadedInChild<T = string[]>(script: string, env: Record<string, string>): T {
  const root = join(__dirname, '..', '..');
  const result = spawnSync(process.execPath, [...TYPESCRIPT_NODE_ARGS, join(root, script)], {
    cwd: root,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  const line = result.stdout.split('\n').find((l) => l.startsWith('LOADED '));
  if (result.status !== 0 || !line)
    throw new Error(`the child app failed:\n${result.stdout}\n${result.stderr}`);
  return JSON.parse(line.slice('LOADED '.length)) as T;
}
