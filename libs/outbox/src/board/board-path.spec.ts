import { boardBase, boardPath } from './board-path';

describe('board paths', () => {
  it('trims slashes from the prefix and defaults to outbox/board', () => {
    expect(boardPath('/ops/outbox/')).toBe('ops/outbox');
    expect(boardPath(undefined)).toBe('outbox/board');
  });

  it('keeps what comes before the prefix (a global prefix) and drops what follows', () => {
    expect(boardBase({ originalUrl: '/api/outbox/board/t/x/events/y?z=1' }, 'outbox/board')).toBe(
      '/api/outbox/board',
    );
    expect(boardBase({ url: '/outbox/board' }, 'outbox/board')).toBe('/outbox/board');
    expect(boardBase({ url: '/outbox/board/' }, 'outbox/board')).toBe('/outbox/board');
    expect(boardBase({}, 'outbox/board')).toBe('/outbox/board');
  });
});
