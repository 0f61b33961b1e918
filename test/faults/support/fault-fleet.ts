import { join } from 'node:path';
import { startChildRelay, type ChildRelay } from '../../support/child-relay';

const SCRIPT = join(__dirname, 'fault-relay-child.ts');

/**
 * A set of relay processes that a scenario can kill, pause and restart: `script` is the relay child (default
 * fault-relay-child.ts).
 */
export class FaultFleet {
  readonly relays: ChildRelay[] = [];

  constructor(
    private readonly env: Record<string, string>,
    private readonly script = SCRIPT,
  ) {}

  /** Starts `count` relay processes and waits until each is ready. */
  async start(count: number): Promise<void> {
    this.relays.push(...(await Promise.all(Array.from({ length: count }, () => this.spawn()))));
  }

  /** Kills relay `index` with SIGKILL and starts a fresh one in its place (without waiting for it). */
  async killAndRestart(index: number): Promise<void> {
    await this.relays[index]!.kill('SIGKILL');
    this.relays[index] = await startChildRelay(this.env, { script: this.script, waitReady: false });
  }

  /** Stops every relay process. */
  async stopAll(): Promise<void> {
    await Promise.all(this.relays.map((relay) => relay.kill('SIGKILL')));
  }

  private spawn(): Promise<ChildRelay> {
    return startChildRelay(this.env, { script: this.script });
  }
}

/** Resolves after `ms`: used to pace fault injection, never to decide a result. */
export function pace(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
