import { Global, Module, type DynamicModule } from '@nestjs/common';
import { OUTBOX_CLOCK, type Clock } from '../../libs/outbox/src/model/clock';

/**
 * A clock that moves one millisecond each time it is read: what the relay times by it (a batch's duration, a
 * scan's age) is a count of readings, the same on a loaded machine as on an idle one.
 */
export function steppingClock(start = Date.now()): Clock {
  let at = start;
  return { now: () => at++ };
}

/**
 * The relay's clock (`OUTBOX_CLOCK`), provided from a global module of the app as the token is read: import
 * `TestClock.of(clock)` into a test app.
 */
@Global()
@Module({})
export class TestClock {
  static of(clock: Clock): DynamicModule {
    return {
      module: TestClock,
      providers: [{ provide: OUTBOX_CLOCK, useValue: clock }],
      exports: [OUTBOX_CLOCK],
    };
  }
}
