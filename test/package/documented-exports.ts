import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const PACKAGE = 'nestjs-pg-outbox';

/**
 * Backticked names in prose that read as the package's exports (`OutboxRelay`, `outboxMigrations`,
 * `WEBHOOK_HEADERS`); migration classes (`OutboxCore1764428400000`) are named in docs but reached through
 * `outboxMigrations`.
 */
const EXPORT_LIKE =
  /^(Outbox[A-Z]\w*(?<!\d{13})|OnOutboxEvent|outboxMigrations(?:For)?|defineOutboxEvents|verifyWebhook|generateWebhookSecret|(OUTBOX|WEBHOOK)_[A-Z_]+)$/;

/** The package's entries: the root (the core) and the feature subpaths (libs/outbox/package.json "exports"). */
export const ENTRIES = [
  PACKAGE,
  `${PACKAGE}/webhooks`,
  `${PACKAGE}/brokers`,
  `${PACKAGE}/inbox`,
  `${PACKAGE}/admin`,
  `${PACKAGE}/board`,
  `${PACKAGE}/observability`,
  `${PACKAGE}/testing`,
] as const;
type Entry = (typeof ENTRIES)[number];

/** The names an entry's source index exports (`export { A, type B } from …`, `export type { C } from …`). */
export function entryExports(entry: Entry): Set<string> {
  const subpath = entry === PACKAGE ? '' : entry.slice(PACKAGE.length + 1);
  const index = readFileSync(join(ROOT, 'libs', 'outbox', 'src', subpath, 'index.ts'), 'utf8');
  const names = new Set<string>();
  for (const match of index.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g))
    for (const part of match[1].split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .at(-1)!
        .trim();
      if (name) names.add(name);
    }
  return names;
}

/**
 * Every name the README and docs/ import from the package or one of its subpaths (in code blocks) or name in
 * backticks as if it were an export, by entry: a backticked name counts for the entry that a code block imports
 * it from, else for the entry whose source index exports it, else for the root. The outside-app test compiles an
 * import of each from the packed package, so a documented name that the package lacks fails it.
 */
export function documentedExports(): Map<Entry, string[]> {
  const pages = [join(ROOT, 'README.md')];
  try {
    for (const name of readdirSync(join(ROOT, 'docs')))
      if (name.endsWith('.md')) pages.push(join(ROOT, 'docs', name));
  } catch {
    // no docs folder: the README alone
  }
  const byEntry = new Map(ENTRIES.map((entry) => [entry, new Set<string>()]));
  const backticked = new Set<string>();
  const imports = /import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g;
  for (const page of pages) {
    const text = readFileSync(page, 'utf8');
    for (const match of text.matchAll(imports)) {
      const names = byEntry.get(match[2] as Entry);
      if (!names) continue;
      for (const part of match[1].split(',')) {
        const name = part
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)[0]
          .trim();
        if (name) names.add(name);
      }
    }
    for (const match of text.matchAll(/`([A-Za-z_][\w]*)(?:\(\))?`/g))
      if (EXPORT_LIKE.test(match[1])) backticked.add(match[1]);
  }
  const imported = new Set(ENTRIES.flatMap((entry) => [...byEntry.get(entry)!]));
  const exporters = ENTRIES.map((entry) => [entry, entryExports(entry)] as const);
  for (const name of backticked) {
    if (imported.has(name)) continue;
    const entry = exporters.find(([, names]) => names.has(name))?.[0] ?? PACKAGE;
    byEntry.get(entry)!.add(name);
  }
  return new Map([...byEntry].map(([entry, names]) => [entry, [...names].sort()]));
}

/** A TypeScript file that imports each documented name from its entry: it compiles only if the package exports them all. */
export function exportsCheckSource(byEntry: ReadonlyMap<string, readonly string[]>): string {
  const blocks = [...byEntry]
    .filter(([, names]) => names.length > 0)
    .map(
      ([entry, names]) =>
        `import type {\n${names.map((name) => `  ${name},\n`).join('')}} from '${entry}';\n`,
    );
  return `// Generated from README.md and docs/: every name they document, imported from its entry.\n${blocks.join('\n')}\nexport {};\n`;
}

/**
 * The README's quick start as files: each TypeScript block that starts with a `// <path> — …` comment, keyed by
 * that path (relative to the app's `src/`).
 */
export function quickStartFiles(): Map<string, string> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('## Quick start');
  const end = readme.indexOf('\n## ', start + 1);
  const files = new Map<string, string>();
  for (const match of readme.slice(start, end).matchAll(/```ts\n([\s\S]*?)```/g)) {
    const path = /^\/\/ ([\w./-]+\.ts) /.exec(match[1])?.[1];
    if (path) files.set(path, match[1]);
  }
  return files;
}
