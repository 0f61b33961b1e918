import { Logger } from '@nestjs/common';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import { errorText } from '../errors/error-text';
import type { OutboxStorePort, TenantConnection } from '../store/outbox-store.port';
import { count, RELAY_LOG_CONTEXT, type TenantBatch } from './tenant-batch';

/**
 * Records outcomes outside a batch transaction's commit: in a short transaction of their own (or in the
 * round's open transaction), not fenced as a batch — outcomes whose lease another relay took are left out and
 * counted as `leaseLost`. A failure is logged and the leases expire.
 */
export class OutcomeRecorder {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);

  constructor(private readonly store: OutboxStorePort) {}

  /**
   * Records `outcomes` of `batch` and counts them in its result. With `connection`, on that connection: a round
   * that holds one never asks the pool for a second (with a pool of one, that would wait forever).
   */
  async record(
    batch: TenantBatch,
    outcomes: DeliveryOutcome[],
    connection?: TenantConnection,
  ): Promise<void> {
    const { tenantId, leaseToken, result } = batch;
    try {
      const { recorded } =
        connection && (connection.inTransaction || !connection.released)
          ? await connection.recordOutcomes({ leaseToken, outcomes })
          : await this.store.recordOutcomes({ tenantId, leaseToken, outcomes });
      count(outcomes, result);
      result.leaseLost += outcomes.length - recorded;
    } catch (error) {
      this.logger.error(
        `could not record ${outcomes.length} outcomes for tenant ${tenantId}; their leases will expire: ${errorText(error)}`,
      );
    }
  }
}
