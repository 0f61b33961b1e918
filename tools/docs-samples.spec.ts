import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SAMPLE_PAGES, sampleFiles } from './docs-samples';

describe('docs samples', () => {
  it('takes every ts block of a page as a file named on its first line', () => {
    const page =
      '```ts\n// a.ts — one\nexport const a = 1;\n```\ntext\n```ts\n// sub/b.ts\nexport const b = 2;\n```\n';
    expect([...sampleFiles('p.md', page).keys()]).toEqual(['a.ts', 'sub/b.ts']);
  });

  it('refuses a ts block without a path (it would not be compiled), naming its line', () => {
    expect(() => sampleFiles('p.md', 'x\n\n```ts\nconst a = 1;\n```\n')).toThrow(
      'p.md:3: a ts block must start',
    );
    expect(() => sampleFiles('p.md', '```ts\n// ../a.ts\n```\n')).toThrow('must start');
    expect(() => sampleFiles('p.md', '```ts\n// a.ts\n```\n```ts\n// a.ts\n```\n')).toThrow('a second block');
  });

  it('finds the app files of docs/typed-events.md', () => {
    const [page] = SAMPLE_PAGES;
    const files = sampleFiles(page!, readFileSync(join(__dirname, '..', page!), 'utf8'));
    expect([...files.keys()]).toEqual(
      expect.arrayContaining(['events.ts', 'app.module.ts', 'contacts.ts', 'contacts.e2e-spec.ts']),
    );
  });
});
