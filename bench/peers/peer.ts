/**
 * What the peers scenario needs from another tool doing "work reliably after a commit": install its schema
 * in the bench database, add an event inside the caller's business transaction, load a backlog, run the two
 * bench consumers, and say how many events are not yet marked done. One file per peer beside this one.
 */
import type { ClientBase } from 'pg';
import type { BenchDatabase } from '../harness/bench-database';

/** The peers measured, as their npm package names. */
export const PEER_NAMES = ['graphile-worker', 'pg-boss', 'pg-transactional-outbox'] as const;
export type PeerName = (typeof PEER_NAMES)[number];

/** The consumer of the latency runs, named as the library's `LatencyConsumer`. */
export const LATENCY_CONSUMER = 'bench.latency';

/** The event each business transaction adds: the contact it created, and an id the handlers report. */
export interface PeerEvent {
  eventId: string;
  contactId: string;
  name: string;
  email: string;
}

/** Options of {@link Peer.startConsumers}. */
export interface PeerConsumerOptions {
  url: string;
  /** The consumers to run (each gets every event): the bench's consumer names. */
  consumers: readonly string[];
  /** `application_name` of every connection the peer opens, to find its backends. */
  applicationName: string;
  /** Called when a consumer's handler runs for an event (before its done mark). */
  onHandled: (eventId: string, consumer: string) => void;
  /** Its poll interval for jobs that became due, in ms; absent: the peer's default (see {@link Peer.delay}). */
  pollIntervalMs?: number;
}

/** A producer's handle on a peer (a started client where the peer needs one, as an app would hold). */
export interface PeerProducer {
  /**
   * Adds `event` for `consumers` on `client`, inside the caller's open transaction; with `dedupeKey`, through the
   * peer's own deduplication (see {@link Peer.dedupe}); with `runAt`, due at that instant (see {@link Peer.delay}).
   */
  enqueue(
    client: ClientBase,
    event: PeerEvent,
    consumers: readonly string[],
    dedupeKey?: string,
    runAt?: Date,
  ): Promise<void>;
  close(): Promise<void>;
}

/** Running consumers of a peer. */
export interface PeerConsumers {
  /** Stops them and closes their connections. */
  stop(): Promise<void>;
}

export interface Peer {
  name: PeerName;
  /** The exact version pinned in the workspace's devDependencies. */
  version: string;
  /** Its settings, and where its docs recommend them: printed with the figures. */
  settings: string;
  /** How the two consumers get each event (a job per consumer, or one message for both). */
  fanOut: string;
  /**
   * The largest backlog it is given to drain, for a peer so slow that the bench's backlog would take minutes:
   * its rate is then measured on fewer events (which flatters a peer whose poll grows with the backlog).
   */
  maxDrainBacklog?: number;
  /** How it deduplicates by key at enqueue, printed with the keyed line; absent: it has no such feature. */
  dedupe?: string;
  /** How it runs a job at a later instant and finds it due, printed with the delayed line; absent: no such feature. */
  delay?: string;
  /** Whether a writing consumer's row commits in the same transaction as its done mark. */
  writesAtomically: boolean;
  /** Creates its schema in the bench database. */
  install(db: BenchDatabase): Promise<void>;
  /** Empties its tables between runs. */
  reset(db: BenchDatabase): Promise<void>;
  /** Drops its schema. Safe to call when not installed. */
  uninstall(db: BenchDatabase): Promise<void>;
  /** What a producer process holds to add events; its own connections carry `applicationName`. */
  openProducer(url: string, applicationName: string): Promise<PeerProducer>;
  /** Loads `count` pending events for `consumers`, in bulk (not timed). */
  loadBacklog(db: BenchDatabase, count: number, consumers: readonly string[]): Promise<void>;
  /** Events (or jobs) not yet marked done. */
  unsettled(query: (text: string) => Promise<{ n: number }[]>): Promise<number>;
  /** After a drain: anything worth saying about how it went (retries, stalls), or null. */
  drainNote?(query: (text: string) => Promise<{ n: number }[]>): Promise<string | null>;
  /** Starts the consumers, tuned for throughput and latency as its docs recommend. */
  startConsumers(options: PeerConsumerOptions): Promise<PeerConsumers>;
}
