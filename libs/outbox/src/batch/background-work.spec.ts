import { Logger } from '@nestjs/common';
import { BackgroundWork } from './background-work';
import { bytesPer } from '../../../../test/support/allocated-bytes';

describe('BackgroundWork', () => {
  afterEach(() => jest.restoreAllMocks());

  it('settles once every tracked work is done, work started by work included', async () => {
    const background = new BackgroundWork();
    const done: string[] = [];
    let finishCommit: () => void = () => undefined;
    const commit = new Promise<void>((resolve) => (finishCommit = resolve)).then(() => {
      done.push('commit');
      // a commit that starts more work (a vacuum) before it is done
      void background.track(Promise.resolve().then(() => done.push('vacuum')));
    });
    void background.track(commit);
    let settled = false;
    const settling = background.settle().then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    finishCommit();
    await settling;
    expect(done).toEqual(['commit', 'vacuum']);
    // nothing left: at once
    await background.settle();
  });

  it('logs a failed work and never rejects', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const background = new BackgroundWork();
    await expect(background.track(Promise.reject(new Error('lost')))).resolves.toBeUndefined();
    await background.settle();
    expect(error).toHaveBeenCalledWith(expect.stringContaining('relay background work failed: Error: lost'));
  });

  it('makes nothing per work beside the promise of its `then` (a batch tracks two)', async () => {
    const background = new BackgroundWork();
    const answered = async (): Promise<number> => 1;
    const ignore = (): void => undefined;
    const bare = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await answered().then(ignore, ignore);
    };
    const tracked = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await background.track(answered());
    };
    await bare(20_000);
    await tracked(20_000);
    const added = (await bytesPer(tracked, 100_000)) - (await bytesPer(bare, 100_000));
    // 0 bytes; 280 with the two callbacks, their context and the set of pending works before
    expect(added).toBeLessThan(100);
  });
});
