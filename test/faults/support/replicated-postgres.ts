import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Client } from 'pg';
import { locateBinaries, type Binaries } from '../../../tools/embedded-postgres/binaries';
import { initCluster, prepareDataDir } from '../../../tools/embedded-postgres/data-folder';
import {
  pgCtlStartArgs,
  pgCtlStopArgs,
  PG_CTL_TIMEOUT_S,
} from '../../../tools/embedded-postgres/pg-commands';
import { findFreePort, startWatchdog } from '../../../tools/embedded-postgres/processes';
import { resolveRunAs, run, type RunAs } from '../../../tools/embedded-postgres/run-as';
import { SERVER_LOG, readLogTail } from '../../../tools/embedded-postgres/server-log';
import { mergeSettings, serverFlags } from '../../../tools/embedded-postgres/server-settings';
import { waitFor } from '../../support/wait-for';
import { TcpProxy } from './tcp-proxy';

/** One server of the pair. */
export interface PostgresNode {
  readonly name: 'primary' | 'standby';
  readonly port: number;
  readonly dataDir: string;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  readonly url: string;
}

/** Options of {@link ReplicatedPostgres.start}. */
export interface ReplicationOptions {
  /** The primary waits for the standby to flush each commit (`synchronous_standby_names`). Default false. */
  synchronous?: boolean;
  /**
   * The standby receives the primary's WAL this late (the stream runs through a delaying proxy): what is in
   * flight when the primary dies never reaches it. Default 0.
   */
  replicationDelayMs?: number;
}

/** The standby's name in `primary_conninfo`, which `synchronous_standby_names` refers to. */
const STANDBY_NAME = 'standby';

/**
 * A primary and a streaming standby on 127.0.0.1, from the embedded PostgreSQL's binaries: the standby is a cold
 * copy of the primary's freshly made data folder with `standby.signal` and a `primary_conninfo`. The test kills,
 * freezes and promotes them with the real signals and `pg_ctl` commands; {@link stop} removes both clusters.
 */
export class ReplicatedPostgres {
  private readonly frozen = new Set<number>();
  private stopped = false;

  private constructor(
    private readonly binaries: Binaries,
    private readonly runAs: RunAs,
    readonly primary: PostgresNode,
    readonly standby: PostgresNode,
    private readonly replicationLink: TcpProxy | null,
    private readonly cleanUp: Array<() => void>,
  ) {}

  static async start(options: ReplicationOptions = {}): Promise<ReplicatedPostgres> {
    const log = (): void => undefined;
    const runAs = resolveRunAs();
    const binaries = await locateBinaries(runAs, log);
    const [primaryDir, standbyDir] = [
      await prepareDataDir(undefined, false, runAs, log),
      await prepareDataDir(undefined, false, runAs, log),
    ];
    // Each folder goes with the test process, however it ends (the embedded server's watchdog).
    const watchdogs = [primaryDir, standbyDir].map((dir) => startWatchdog(dir, log));
    const cleanUp = watchdogs.map((watchdog) => () => void watchdog.kill('SIGKILL'));
    await initCluster(binaries, runAs, primaryDir, true);
    await copyCluster(primaryDir, standbyDir, runAs);
    const [primaryPort, standbyPort] = [await findFreePort(), await findFreePort()];
    const link =
      options.replicationDelayMs !== undefined && options.replicationDelayMs > 0
        ? await TcpProxy.start(primaryPort, { delayMs: options.replicationDelayMs })
        : null;
    const node = (name: PostgresNode['name'], port: number, dataDir: string): PostgresNode => ({
      name,
      port,
      dataDir,
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    });
    const pair = new ReplicatedPostgres(
      binaries,
      runAs,
      node('primary', primaryPort, primaryDir),
      node('standby', standbyPort, standbyDir),
      link,
      cleanUp,
    );
    try {
      await pair.launch(pair.primary, {
        wal_level: 'replica',
        ...(options.synchronous ? { synchronous_standby_names: STANDBY_NAME } : {}),
      });
      const signal = await run('touch', [join(standbyDir, 'standby.signal')], runAs);
      if (!signal.ok) throw new Error(`could not write the standby's standby.signal: ${signal.output}`);
      await pair.launch(pair.standby, {
        primary_conninfo: `host=127.0.0.1 port=${link?.port ?? primaryPort} user=postgres application_name=${STANDBY_NAME}`,
      });
      await pair.waitForStreaming(options.synchronous ? 'sync' : 'async');
    } catch (error) {
      await pair.stop();
      throw error;
    }
    return pair;
  }

  /** Crashes `node` (`pg_ctl stop -m immediate`): its processes exit at once, their connections close. */
  async kill(node: PostgresNode): Promise<void> {
    const result = await run(this.binaries.pgCtl, pgCtlStopArgs(node.dataDir, 'immediate'), this.runAs);
    if (!result.ok) throw new Error(`pg_ctl stop -m immediate of the ${node.name} failed: ${result.output}`);
  }

  /**
   * Stops every process of `node`'s cluster with SIGSTOP, the postmaster first (so that it forks no more): its
   * connections stay open and silent, as a stalled host or a network partition looks.
   */
  async freeze(node: PostgresNode): Promise<number> {
    const postmaster = await postmasterOf(node);
    process.kill(postmaster, 'SIGSTOP');
    this.frozen.add(postmaster);
    const children = await childrenOf(postmaster);
    for (const pid of children) {
      process.kill(pid, 'SIGSTOP');
      this.frozen.add(pid);
    }
    return 1 + children.length;
  }

  /** Promotes the standby (`pg_ctl promote -w`): resolves once it accepts writes. */
  async promote(node: PostgresNode): Promise<void> {
    const args = ['promote', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-D', node.dataDir];
    const result = await run(this.binaries.pgCtl, args, this.runAs);
    if (!result.ok) throw new Error(`pg_ctl promote of the ${node.name} failed: ${result.output}`);
  }

  /** Stops both servers (thawing frozen ones first) and removes their folders. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const pid of this.frozen) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // already gone
      }
    }
    for (const node of [this.primary, this.standby]) {
      await run(this.binaries.pgCtl, pgCtlStopArgs(node.dataDir, 'immediate', 10), this.runAs);
      await rm(node.dataDir, { recursive: true, force: true });
    }
    await this.replicationLink?.close();
    for (const cleanUp of this.cleanUp) cleanUp();
  }

  private async launch(node: PostgresNode, settings: Record<string, string>): Promise<void> {
    const logFile = join(node.dataDir, SERVER_LOG);
    const flags = serverFlags({ ...mergeSettings(settings), port: String(node.port) });
    const result = await run(this.binaries.pgCtl, pgCtlStartArgs(node.dataDir, logFile, flags), this.runAs);
    if (!result.ok) {
      throw new Error(
        `the ${node.name} did not start on port ${node.port}: ${result.output}\n${await readLogTail(logFile, 0)}`,
      );
    }
  }

  private async waitForStreaming(syncState: 'sync' | 'async'): Promise<void> {
    const client = new Client({ connectionString: this.primary.url });
    await client.connect();
    try {
      await waitFor(
        async () => {
          const { rows } = await client.query<{ n: number }>(
            `select count(*)::int n from pg_stat_replication where state = 'streaming' and sync_state = $1`,
            [syncState],
          );
          return rows[0]!.n === 1;
        },
        { timeoutMs: 30_000, intervalMs: 50, message: `a ${syncState} standby streaming from the primary` },
      );
    } finally {
      await client.end();
    }
  }
}

/** Copies a stopped cluster's folder, as the user who runs the servers (so that ownership and modes stay). */
async function copyCluster(from: string, to: string, runAs: RunAs): Promise<void> {
  const result = await run('cp', ['-a', `${from}/.`, to], runAs);
  if (!result.ok) throw new Error(`could not copy ${from} to ${to}: ${result.output}`);
}

async function postmasterOf(node: PostgresNode): Promise<number> {
  const pid = Number.parseInt(
    (await readFile(join(node.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]!,
    10,
  );
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no postmaster pid in the ${node.name}'s folder`);
  return pid;
}

/** The processes whose parent is `pid`, from /proc (Linux: where the embedded binaries run). */
async function childrenOf(pid: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => null);
    // The parent's pid is the second field after the command, which is in parentheses and may hold spaces.
    const parent = stat === null ? NaN : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent === pid) children.push(Number(entry));
  }
  return children;
}
