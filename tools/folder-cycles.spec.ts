import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * No import cycle between the library's folders (STYLE.md, "arrows run one way"). A unit is a folder, each
 * sub-folder on its own (`observability/metrics/` is not `observability/`), or a file at the root of src/; every relative
 * import of a non-spec file is an arrow, type-only ones included. The cycles found today (issue 34) are the
 * allow-list below, a ratchet: a unit that joins a cycle fails this spec with the imports that bring it in, and a
 * unit that leaves one must be taken off the list. The list goes to `[]` when the folders follow the event's path.
 */
const ALLOWED_CYCLES: readonly (readonly string[])[] = [];

const SRC = path.join(__dirname, '../libs/outbox/src');

interface Arrow {
  from: string;
  to: string;
}

describe('folder import cycles of libs/outbox/src', () => {
  it('are the allowed ones: no unit joins a cycle, and the list names no unit that left one', () => {
    const arrows = relativeImports(SRC);
    const cycles = stronglyConnected(arrows);
    const key = (units: readonly string[]): string => [...units].sort().join(' ');
    const allowed = new Map(ALLOWED_CYCLES.map((units, i) => [key(units), i]));
    // which allowed cycle a unit belongs to (a unit in none is its own group)
    const group = (unit: string): string => {
      const i = ALLOWED_CYCLES.findIndex((units) => units.includes(unit));
      return i < 0 ? unit : `#${i}`;
    };
    const reports: string[] = [];
    const seen = new Set<number>();
    for (const cycle of cycles) {
      const match = allowed.get(key(cycle));
      if (match !== undefined) {
        seen.add(match);
        continue;
      }
      const inside = new Set(cycle);
      const within = ALLOWED_CYCLES.findIndex((units) => cycle.every((u) => units.includes(u)));
      if (within >= 0) {
        seen.add(within);
        const left = ALLOWED_CYCLES[within]!.filter((u) => !inside.has(u));
        reports.push(`the cycle is smaller now: take ${left.join(', ')} off ALLOWED_CYCLES`);
        continue;
      }
      // a bigger cycle that swallowed allowed ones: reported once, here
      for (const unit of cycle) {
        const i = ALLOWED_CYCLES.findIndex((units) => units.includes(unit));
        if (i >= 0) seen.add(i);
      }
      reports.push(
        `a cycle that is not allowed: ${key(cycle)}, closed by these imports:` +
          backImports(arrows, inside, group)
            .map((a) => `\n - ${a.from} -> ${a.to}`)
            .join(''),
      );
    }
    ALLOWED_CYCLES.forEach((units, i) => {
      if (!seen.has(i)) reports.push(`the cycle ${key(units)} is gone: take it off ALLOWED_CYCLES`);
    });
    expect(reports).toEqual([]);
  });
});

/**
 * The imports that close a new cycle: between two of its groups (an allowed cycle, or a unit in none) that import
 * each other, the direction with fewer imports — the usual arrow is the many, the one that runs back is the few.
 */
function backImports(
  arrows: readonly Arrow[],
  inside: Set<string>,
  group: (unit: string) => string,
): Arrow[] {
  const crossing = new Map<string, Arrow[]>();
  for (const a of arrows) {
    const [from, to] = [unitOf(a.from), unitOf(a.to)];
    if (!inside.has(from) || !inside.has(to) || group(from) === group(to)) continue;
    const pair = `${group(from)} > ${group(to)}`;
    crossing.set(pair, [...(crossing.get(pair) ?? []), a]);
  }
  return [...crossing].flatMap(([pair, list]) => {
    const [from, to] = pair.split(' > ');
    const reverse = crossing.get(`${to} > ${from}`);
    return reverse && reverse.length < list.length ? [] : list;
  });
}

/** The unit of a path relative to src/: its folder, or the file itself at the root. */
function unitOf(file: string): string {
  const dir = path.posix.dirname(file);
  return dir === '.' ? file : `${dir}/`;
}

/** Every relative import between two files of src/ (paths relative to src/, with `/`). */
function relativeImports(src: string): Arrow[] {
  const arrows: Arrow[] = [];
  for (const file of sourceFiles(src)) {
    const from = path.relative(src, file).split(path.sep).join('/');
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = resolve(path.resolve(path.dirname(file), fileName));
      if (target?.startsWith(src + path.sep))
        arrows.push({ from, to: path.relative(src, target).split(path.sep).join('/') });
    }
  }
  return arrows;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.ts$/.test(entry.name) && !/\.(spec|d)\.ts$/.test(entry.name) ? [full] : [];
  });
}

function resolve(base: string): string | undefined {
  const stem = base.replace(/\.js$/, '');
  return [`${stem}.ts`, path.join(stem, 'index.ts')].find((candidate) => fs.existsSync(candidate));
}

/** Tarjan's strongly connected components of the unit graph, those of more than one unit. */
function stronglyConnected(arrows: readonly Arrow[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const { from, to } of arrows) {
    const [a, b] = [unitOf(from), unitOf(to)];
    if (!next.has(a)) next.set(a, new Set());
    if (!next.has(b)) next.set(b, new Set());
    if (a !== b) next.get(a)!.add(b);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) components.push(component);
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return components;
}
