import { readFileSync } from 'node:fs';
import { join } from 'node:path';

describe('the host-selecting Client class of docs/operating.md', () => {
  it('is, word for word, the file the failover scenario runs', () => {
    const source = readFileSync(join(__dirname, 'writable-primary-client.ts'), 'utf8');
    const page = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'operating.md'), 'utf8');
    expect(page).toContain('```ts\n' + source + '```\n');
  });
});
