export {
  OutboxTestKit,
  OutboxTestKitError,
  type OutboxTestKitOptions,
  type OutboxDrainOptions,
  type OutboxTestDelivery,
  type OutboxEnqueuedEvent,
} from './outbox-test-kit';
export { matchesPayload, type OutboxPayloadMatcher, type DeepPartial } from './payload-matcher';
