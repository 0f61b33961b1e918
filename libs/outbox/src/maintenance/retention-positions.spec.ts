import { RetentionPositions } from './retention-positions';

describe('RetentionPositions', () => {
  const at = { ranges: [null], ats: ['2026-01-01 00:00:00.000001+00'] };

  it('starts the first run from the oldest event and later runs from where the last batch ended', () => {
    let now = 0;
    const positions = new RetentionPositions({ now: () => now }, 1000);
    positions.startRun();
    expect(positions.current).toEqual({ ranges: [], ats: [] });
    positions.moveTo(at);
    now = 999;
    positions.startRun();
    expect(positions.current).toEqual(at);
  });

  it('starts from the oldest event again once a full scan is due', () => {
    let now = 0;
    const positions = new RetentionPositions({ now: () => now }, 1000);
    positions.startRun();
    positions.moveTo(at);
    now = 1000;
    positions.startRun();
    expect(positions.current).toEqual({ ranges: [], ats: [] });
    positions.moveTo(at);
    now = 1999;
    positions.startRun();
    expect(positions.current).toEqual(at);
  });
});
