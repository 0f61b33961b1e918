/**
 * The statements of the relay, enqueue and wake-up, one file per operation (the operator's statements are in
 * `admin.ts`, the webhook subscriptions' in `webhooks.ts`). Every statement on the outbox tables is a function
 * returning `{ text, values }`: values are always parameters, never interpolated; identifiers come from
 * the `OutboxNames` of `schema.ts`, every builder's first parameter; bulk work is one statement over arrays.
 */
export * from './statement';
export * from '../../model/table-names';
export * from './wakeup';
export * from './enqueue';
export * from './transaction-context';
export * from './batch-seal';
export * from './due-tenants';
export * from './claim-due';
export * from './claim-floor';
export * from './fan-out';
export * from './claim-new';
export * from './event-pattern';
export * from './registry';
export * from './leases';
export * from './record-outcomes';
export * from './backfill';
export * from './consumer-pauses';
export * from './promote-scheduled';
export * from './consumer-limits';
