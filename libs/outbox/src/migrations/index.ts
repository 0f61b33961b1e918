import { OutboxCore1764428400000 } from './1764428400000-outbox-core';
import { OutboxTenancy1764428600000 } from './1764428600000-outbox-tenancy';
import { OutboxAdmin1764428650000 } from './1764428650000-outbox-admin';
import { OutboxWebhooks1764428700000 } from './1764428700000-outbox-webhooks';
import { OutboxEventLeases1764428800000 } from './1764428800000-outbox-event-leases';
import { OutboxLeaseFence1764432000000 } from './1764432000000-outbox-lease-fence';
import { OutboxRelayMaintain1764435600000 } from './1764435600000-outbox-relay-maintain';
import { OutboxAggregateKey1764450000000 } from './1764450000000-outbox-aggregate-key';
import { OutboxPurgeFloor1764450300000 } from './1764450300000-outbox-purge-floor';
import { OutboxStandardSecrets1764450400000 } from './1764450400000-outbox-standard-secrets';
import { OutboxSubscriptionSecrets1764450200000 } from './1764450200000-outbox-subscription-secrets';
import { OutboxBoard1764500100000 } from './1764500100000-outbox-board';
import { OutboxTraceContext1764500200000 } from './1764500200000-outbox-trace-context';
import { OutboxInbox1764500300000 } from './1764500300000-outbox-inbox';
import { OutboxInboxTenantKey1764500400000 } from './1764500400000-outbox-inbox-tenant-key';
import { OutboxBatchSeal1764500700000 } from './1764500700000-outbox-batch-seal';
import { OutboxPurgeRelayInbox1764500800000 } from './1764500800000-outbox-purge-relay-inbox';
import { OutboxBackfills1764500900000 } from './1764500900000-outbox-backfills';
import { OutboxConsumerPauses1764501000000 } from './1764501000000-outbox-consumer-pauses';
import { OutboxSnooze1764501400000 } from './1764501400000-outbox-snooze';
import { OutboxEventSearch1764501500000 } from './1764501500000-outbox-event-search';
import { OutboxScheduledEvents1764501600000 } from './1764501600000-outbox-scheduled-events';
import { OutboxConsumerLimits1764501700000 } from './1764501700000-outbox-consumer-limits';
import { OutboxOverdueScheduled1764501800000 } from './1764501800000-outbox-overdue-scheduled';
import { OutboxDedupeKeys1764501900000 } from './1764501900000-outbox-dedupe-keys';
import { OutboxDedupeTake1764502000000 } from './1764502000000-outbox-dedupe-take';
import { OutboxConsumerLimitsFrom1764502050000 } from './1764502050000-outbox-consumer-limits-from';
import { OutboxPartitionMaintenance1764502400000 } from './1764502400000-outbox-partition-maintenance';
import { OutboxConsumerInstanceStart1764502500000 } from './1764502500000-outbox-consumer-instance-start';
import { OutboxDueTenantsPastSettled1764502600000 } from './1764502600000-outbox-due-tenants-past-settled';
import { OutboxConsumerKeyLimits1764502800000 } from './1764502800000-outbox-consumer-key-limits';
import { OutboxDueTenantsProbes1764502900000 } from './1764502900000-outbox-due-tenants-probes';
import { OutboxClaimFloor1764502700000 } from './1764502700000-outbox-claim-floor';
import { OutboxClaimFloorClaimable1764503100000 } from './1764503100000-outbox-claim-floor-claimable';
import { OutboxReadingsOnGenericPlans1764503600000 } from './1764503600000-outbox-readings-on-generic-plans';
import { OutboxReleaseLeases1764503800000 } from './1764503800000-outbox-release-leases';
import { OutboxDueTenantsOrderedProbes1764503900000 } from './1764503900000-outbox-due-tenants-ordered-probes';
import { OutboxPurgeFromPosition1764504000000 } from './1764504000000-outbox-purge-from-position';
import { OutboxDueTenantsFloor1764504100000 } from './1764504100000-outbox-due-tenants-floor';
import { OutboxOldestPendingFromPositions1764504200000 } from './1764504200000-outbox-oldest-pending-from-positions';
import { OutboxClaimFloorOpenFrom1764504600000 } from './1764504600000-outbox-claim-floor-open-from';
import { OutboxOrderedOpenIndex1764504700000 } from './1764504700000-outbox-ordered-open-index';

/** The outbox migrations in order, for `DataSource({ migrations })`. */
export const outboxMigrations = [
  OutboxCore1764428400000,
  OutboxTenancy1764428600000,
  OutboxAdmin1764428650000,
  OutboxWebhooks1764428700000,
  OutboxEventLeases1764428800000,
  OutboxLeaseFence1764432000000,
  OutboxRelayMaintain1764435600000,
  OutboxAggregateKey1764450000000,
  OutboxSubscriptionSecrets1764450200000,
  OutboxPurgeFloor1764450300000,
  OutboxStandardSecrets1764450400000,
  OutboxBoard1764500100000,
  OutboxTraceContext1764500200000,
  OutboxInbox1764500300000,
  OutboxInboxTenantKey1764500400000,
  OutboxBatchSeal1764500700000,
  OutboxPurgeRelayInbox1764500800000,
  OutboxBackfills1764500900000,
  OutboxConsumerPauses1764501000000,
  OutboxSnooze1764501400000,
  OutboxEventSearch1764501500000,
  OutboxScheduledEvents1764501600000,
  OutboxConsumerLimits1764501700000,
  OutboxOverdueScheduled1764501800000,
  OutboxDedupeKeys1764501900000,
  OutboxDedupeTake1764502000000,
  OutboxConsumerLimitsFrom1764502050000,
  OutboxPartitionMaintenance1764502400000,
  OutboxConsumerInstanceStart1764502500000,
  OutboxDueTenantsPastSettled1764502600000,
  OutboxClaimFloor1764502700000,
  OutboxConsumerKeyLimits1764502800000,
  OutboxDueTenantsProbes1764502900000,
  OutboxClaimFloorClaimable1764503100000,
  OutboxReadingsOnGenericPlans1764503600000,
  OutboxReleaseLeases1764503800000,
  OutboxDueTenantsOrderedProbes1764503900000,
  OutboxPurgeFromPosition1764504000000,
  OutboxDueTenantsFloor1764504100000,
  OutboxOldestPendingFromPositions1764504200000,
  OutboxClaimFloorOpenFrom1764504600000,
  OutboxOrderedOpenIndex1764504700000,
];
