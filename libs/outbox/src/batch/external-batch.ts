import { Logger } from '@nestjs/common';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { ExternalDispatcher } from './external.dispatcher';
import { errorText } from '../errors/error-text';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxStorePort } from '../store/outbox-store.port';
import { RELAY_LOG_CONTEXT, type Assigned, type TenantBatch } from './tenant-batch';

/** External deliveries whose leases are kept (`ExternalBatch.hold`). */
export interface HeldExternal {
  /** Sends them and returns their outcomes (not recorded yet); the keeping of their leases ends with it. */
  send(): Promise<DeliveryOutcome[]>;
  /** Stops keeping their leases (when they are not sent). */
  stop(): void;
}

/**
 * External deliveries (webhooks, brokers) of a batch: sent with no transaction open and no connection held;
 * from their claim until their outcomes are known, their leases are pushed back every third of a lease (the lease
 * keeper), so neither the in-process batch they wait for nor slow endpoints make them outlive their lease and get
 * sent twice.
 */
export class ExternalBatch {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);

  constructor(
    private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStorePort,
    private readonly external: ExternalDispatcher,
  ) {}

  /**
   * Starts keeping the leases of the deliveries now, and says how to send them (the keeping ends with the send)
   * or to stop keeping them unsent. From the claim on: deliveries claimed with in-process ones wait for that
   * batch's handlers first, and without their leases kept another relay would take them over meanwhile and send
   * them too (and, for a consumer with a concurrency cap, past it).
   */
  hold(batch: TenantBatch, remote: Assigned[]): HeldExternal {
    const { leaseMs } = this.options.relay;
    const { tenantId, leaseToken } = batch;
    const ids = remote.flatMap((a) => (a.delivery.deliveryId === null ? [] : [a.delivery.deliveryId]));
    const keeper = setInterval(
      () => {
        this.store
          .extendLeases({ tenantId, leaseToken, deliveryIds: ids })
          .catch((error) =>
            this.logger.warn(
              `could not extend the leases of ${ids.length} deliveries for tenant ${tenantId}: ${errorText(error)}`,
            ),
          );
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    const stop = (): void => clearInterval(keeper);
    return {
      send: async () => {
        try {
          return await this.external.dispatch(remote);
        } finally {
          stop();
        }
      },
      stop,
    };
  }
}
