/** The peers the bench compares the library with, in the order they are reported. */
import { graphileWorkerPeer } from './graphile-worker.peer';
import type { Peer, PeerName } from './peer';
import { pgBossPeer } from './pg-boss.peer';
import { pgTransactionalOutboxPeer } from './pg-transactional-outbox.peer';

export const PEERS: readonly Peer[] = [graphileWorkerPeer, pgBossPeer, pgTransactionalOutboxPeer];

export function peerNamed(name: PeerName): Peer {
  const peer = PEERS.find((p) => p.name === name);
  if (!peer) throw new Error(`no peer named "${name}"; known: ${PEERS.map((p) => p.name).join(', ')}`);
  return peer;
}
