/**
 * The raw relay woken by LISTEN/NOTIFY, the latency baseline: a dedicated listening connection, and on each
 * notification the batched relay drains what is pending on a second connection (bursts coalesce into one
 * more drain).
 */
import { drainBatched, type RawRelayPlan } from './batched-relay';
import { RawSession } from './raw-session';

/** The channel the raw producer notifies after commit. */
export const RAW_NOTIFY_CHANNEL = 'bench_outbox';

const LISTENER = 'bench-raw-listener';
const WORKER = 'bench-raw-relay';
/** `application_name` of the relay's two connections. */
export const NOTIFY_RELAY_APPLICATION_NAMES = [LISTENER, WORKER] as const;

export class NotifyRelay {
  private draining: Promise<void> | null = null;
  private again = false;
  private failure: { error: unknown } | null = null;

  private constructor(
    private readonly listener: RawSession,
    private readonly worker: RawSession,
    private readonly plan: RawRelayPlan,
  ) {}

  static async start(url: string, plan: RawRelayPlan): Promise<NotifyRelay> {
    const listener = await RawSession.connect(url, LISTENER);
    const worker = await RawSession.connect(url, WORKER);
    const relay = new NotifyRelay(listener, worker, plan);
    listener.client.on('notification', () => relay.kick());
    await listener.rows(`listen ${RAW_NOTIFY_CHANNEL}`);
    return relay;
  }

  /** Stops listening, waits for the drain in flight, closes both connections; rethrows a drain's failure. */
  async stop(): Promise<void> {
    await this.listener.end();
    await this.draining;
    await this.worker.end();
    if (this.failure) throw this.failure.error;
  }

  private kick(): void {
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = this.drain().finally(() => (this.draining = null));
  }

  private async drain(): Promise<void> {
    try {
      do {
        this.again = false;
        await drainBatched(this.worker, this.plan);
      } while (this.again);
    } catch (error) {
      this.failure ??= { error };
    }
  }
}
