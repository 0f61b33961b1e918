import { Global, Module, type DynamicModule } from '@nestjs/common';
import { OUTBOX_RELAY_POLICY_SWITCHES, type RelayPolicy } from '../../libs/outbox/src/options/relay-policy';

/**
 * Switches over the relay's policy (internal, not options: see `RelayPolicy`), provided as the decision scripts and
 * the benchmark provide them: from a global module of the app. Import `PolicySwitches.of({ ... })` into a test app.
 */
@Global()
@Module({})
export class PolicySwitches {
  static of(switches: Partial<RelayPolicy>): DynamicModule {
    return {
      module: PolicySwitches,
      providers: [{ provide: OUTBOX_RELAY_POLICY_SWITCHES, useValue: switches }],
      exports: [OUTBOX_RELAY_POLICY_SWITCHES],
    };
  }
}
