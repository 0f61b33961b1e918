export { OutboxAdminService } from './outbox-admin.service';
export type {
  OutboxStats,
  OutboxBlockedAggregate,
  OutboxConsumerCounts,
  OutboxEventStatus,
  OutboxDeliveryStatus,
  OutboxFailedFilter,
  OutboxFailedEventsQuery,
  OutboxFailedEvent,
  OutboxFailedDelivery,
  OutboxPage,
  OutboxEventDeliveries,
  OutboxDeliveryRecord,
  OutboxInboxCounts,
} from './outbox-admin.interfaces';
export { OutboxAdminModule } from './outbox-admin.module';
export type {
  OutboxActionOptions,
  OutboxAuditEntry,
  OutboxBackfillReport,
  OutboxBackfillRequest,
  OutboxBackfillState,
  OutboxConsumerPause,
  OutboxConsumerPauseScope,
  OutboxEventSearch,
  OutboxEventMatch,
  OutboxEventSearchPage,
  OutboxBulkFilter,
  OutboxBulkRequest,
  OutboxBulkReport,
} from './outbox-admin.interfaces';
export type { OutboxAdminModuleOptions } from './outbox-admin-options.interface';
export {
  OutboxHealthIndicator,
  type OutboxHealthOptions,
  type OutboxHealthDetails,
} from './outbox.health-indicator';
export type {
  OutboxDoctorReport,
  OutboxDoctorFinding,
  OutboxDoctorSeverity,
  OutboxDoctorCheck,
  OutboxDoctorThresholds,
} from '../model/outbox-doctor-report.interface';
