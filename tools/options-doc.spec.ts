import { isDeepStrictEqual } from 'node:util';
import { OUTBOX_DEFAULTS, resolveOutboxOptions } from '../libs/outbox/src/options/outbox-options';
import { DEFAULT_WEBHOOK_CIRCUIT_BREAKER } from '../libs/outbox/src/webhooks/webhook-endpoint';
import { OUTBOX_WEBHOOKS_DEFAULTS } from '../libs/outbox/src/webhooks/outbox-webhooks-options';
import {
  collectOptionTables,
  configurationPage,
  GENERATED_END,
  GENERATED_START,
  literalOf,
  loadSources,
  OPTION_SECTIONS,
  ROOT,
  renderOptionTables,
  replaceGeneratedSection,
  stalenessMessage,
  type OptionRow,
  type OptionSection,
} from './options-doc';

const demoSection: OptionSection = { heading: 'Demo', file: 'demo.ts', interfaceName: 'DemoOptions' };

function rowsOf(interfaceName: string): OptionRow[] {
  const table = collectOptionTables(loadSources(ROOT, OPTION_SECTIONS), OPTION_SECTIONS).find(
    ({ section }) => section.interfaceName === interfaceName,
  );
  if (!table) throw new Error(`no section for ${interfaceName}`);
  return table.rows;
}

/** Every leaf of the defaults object by its dotted path (arrays and null are leaves). */
function leaves(value: object, prefix = ''): Map<string, unknown> {
  const found = new Map<string, unknown>();
  for (const [key, child] of Object.entries(value)) {
    if (child !== null && typeof child === 'object' && !Array.isArray(child)) {
      for (const [path, leaf] of leaves(child as object, `${prefix}${key}.`)) found.set(path, leaf);
    } else found.set(`${prefix}${key}`, child);
  }
  return found;
}

describe('docs/configuration.md', () => {
  it("holds the tables that the options interfaces' JSDoc makes", async () => {
    const { current, expected } = await configurationPage();
    expect(stalenessMessage(current, expected)).toBeNull();
  });
});

describe('the documented defaults', () => {
  it('of OutboxModule.forRoot() are the values of OUTBOX_DEFAULTS, option by option', () => {
    const rows = rowsOf('OutboxModuleOptions');
    const defaults = leaves(OUTBOX_DEFAULTS);
    expect(rows.map((row) => row.path).sort()).toEqual([...defaults.keys()].sort());
    const drifted = rows
      .filter(
        (row) => row.defaultLiteral && !isDeepStrictEqual(row.defaultLiteral.value, defaults.get(row.path)),
      )
      .map(
        (row) =>
          `${row.path}: the JSDoc says ${JSON.stringify(row.defaultLiteral!.value)}, ` +
          `OUTBOX_DEFAULTS has ${JSON.stringify(defaults.get(row.path))}`,
      );
    expect(drifted).toEqual([]);
    // Only these are not literals: each is checked against the merge below.
    expect(rows.filter((row) => !row.defaultLiteral).map((row) => row.path)).toEqual([
      'dataSource',
      'relay.roundTripTimeoutMs',
    ]);
  });

  it('of OutboxWebhooksModule.forRoot() are the values of OUTBOX_WEBHOOKS_DEFAULTS, option by option', () => {
    const rows = rowsOf('OutboxWebhooksModuleOptions');
    const defaults = leaves({ ...OUTBOX_WEBHOOKS_DEFAULTS, isGlobal: true });
    expect(rows.map((row) => row.path).sort()).toEqual([...defaults.keys()].sort());
    expect(
      rows.filter((row) => !isDeepStrictEqual(row.defaultLiteral?.value, defaults.get(row.path))),
    ).toEqual([]);
  });

  it('that are not literals are what resolveOutboxOptions() gives', () => {
    expect(resolveOutboxOptions({}).options.dataSource).toBeUndefined();
    expect(
      rowsOf('OutboxModuleOptions').find((row) => row.path === 'relay.roundTripTimeoutMs')?.defaultText,
    ).toMatch(/^`relay\.leaseMs \+ 1000`/);
    expect(resolveOutboxOptions({}).options.relay.roundTripTimeoutMs).toBe(61_000);
    expect(resolveOutboxOptions({ relay: { leaseMs: 5000 } }).options.relay.roundTripTimeoutMs).toBe(6000);
    expect(resolveOutboxOptions({ relay: { roundTripTimeoutMs: 0 } }).options.relay.roundTripTimeoutMs).toBe(
      0,
    );
  });

  it("of a webhook's circuit breaker are DEFAULT_WEBHOOK_CIRCUIT_BREAKER", () => {
    const documented = Object.fromEntries(
      rowsOf('OutboxWebhookOptions')
        .filter((row) => row.path.startsWith('circuitBreaker'))
        .map((row) => [row.path, row.defaultLiteral?.value]),
    );
    expect(documented).toEqual({
      circuitBreaker: DEFAULT_WEBHOOK_CIRCUIT_BREAKER,
      'circuitBreaker.failureThreshold': DEFAULT_WEBHOOK_CIRCUIT_BREAKER.failureThreshold,
      'circuitBreaker.cooldownMs': DEFAULT_WEBHOOK_CIRCUIT_BREAKER.cooldownMs,
    });
  });
});

describe('collectOptionTables', () => {
  it('fails naming an exported option that has no JSDoc', () => {
    const text = [
      '/** Options of a demo. */',
      'export interface DemoOptions {',
      '  /** Documented. Default: `1`. */',
      '  documented?: number;',
      '  undocumented?: string;',
      '}',
    ].join('\n');
    expect(() => collectOptionTables([{ fileName: 'demo.ts', text }], [demoSection])).toThrow(
      /DemoOptions\.undocumented \(demo\.ts:5\) has no JSDoc/,
    );
  });

  it('lists every default that breaks the convention, each by its option', () => {
    const text = [
      '/** Options of a demo. */',
      'export interface DemoOptions {',
      '  /** Spelled the old way. Default 5. */',
      '  oldWay?: number;',
      '  /** Optional, with no default. */',
      '  noDefault?: number;',
      '  /** Required, with a default. Default: `1`. */',
      '  needed: number;',
      '  /** Default: `2`. Then more. */',
      '  notLast?: number;',
      '}',
    ].join('\n');
    let message = '';
    try {
      collectOptionTables([{ fileName: 'demo.ts', text }], [demoSection]);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/^options-doc found \d+ problems:/);
    expect(message).toMatch(/DemoOptions\.oldWay \(demo\.ts:4\) writes its default in another form/);
    expect(message).toMatch(
      /DemoOptions\.noDefault \(demo\.ts:6\) is optional but its JSDoc gives no default/,
    );
    expect(message).toMatch(/DemoOptions\.needed \(demo\.ts:8\) is required, yet its JSDoc gives a default/);
    expect(message).toMatch(/DemoOptions\.notLast \(demo\.ts:10\) gives only a default/);
    expect(message).toMatch(/DemoOptions\.notLast \(demo\.ts:10\) says more after its `Default: …`/);
  });

  it('makes dotted rows of nested option interfaces, in declaration order, with | escaped', () => {
    const text = [
      '/** Inner. */',
      'export interface InnerOptions {',
      "  /** How. Default: `'a'`. */",
      "  mode?: 'a' | 'b';",
      '}',
      '/** Options of a demo. */',
      'export interface DemoOptions {',
      '  /** Name. */',
      '  name: string;',
      '  /** Inner settings. */',
      '  inner?: InnerOptions;',
      "  /** Inner, or `false` for none. Default: `{ mode: 'a' }` (on). */",
      '  toggle?: InnerOptions | false;',
      '}',
    ].join('\n');
    const [table] = collectOptionTables([{ fileName: 'demo.ts', text }], [demoSection]);
    expect(table.rows.map((row) => [row.path, row.type, row.defaultText])).toEqual([
      ['name', 'string', null],
      ['inner.mode', "'a' | 'b'", "`'a'`"],
      ['toggle', 'InnerOptions | false', "`{ mode: 'a' }` (on)"],
      ['toggle.mode', "'a' | 'b'", "`'a'`"],
    ]);
    expect(renderOptionTables([table])).toContain("| `inner.mode` | `'a' \\| 'b'` | `'a'` | How. |");
    expect(renderOptionTables([table])).toContain('| `name` | `string` | required | Name. |');
  });
});

describe('literalOf', () => {
  it('reads literal defaults, with or without a remark in parentheses', () => {
    expect(literalOf('`300000` (5 minutes)')).toEqual({ value: 300000 });
    expect(literalOf("`'multi'`")).toEqual({ value: 'multi' });
    expect(literalOf('`null` (the relay asks the database)')).toEqual({ value: null });
    expect(literalOf('`{ failureThreshold: 5, cooldownMs: 30000 }`')).toEqual({
      value: { failureThreshold: 5, cooldownMs: 30000 },
    });
  });

  it('leaves expressions and prose alone', () => {
    expect(literalOf('`ClassName.methodName`')).toBeNull();
    expect(literalOf('`!relay.enabled` (`true` on an instance that only enqueues)')).toBeNull();
    expect(literalOf("the module's `maxAttempts`")).toBeNull();
  });
});

describe('replaceGeneratedSection', () => {
  it('rewrites only what lies between the markers', () => {
    const page = `# Title\n\nBy hand.\n\n${GENERATED_START}\nold\n${GENERATED_END}\n\nAfter.\n`;
    expect(replaceGeneratedSection(page, 'new\n', 'page.md')).toBe(
      `# Title\n\nBy hand.\n\n${GENERATED_START}\n\nnew\n\n${GENERATED_END}\n\nAfter.\n`,
    );
  });

  it('refuses a page without both markers', () => {
    expect(() => replaceGeneratedSection(`# Title\n${GENERATED_START}\n`, 'new', 'page.md')).toThrow(
      /page\.md must contain the line <!-- generated:options:start --> once/,
    );
  });
});
