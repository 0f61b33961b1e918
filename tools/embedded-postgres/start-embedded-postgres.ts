import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { locateBinaries } from './binaries';
import { initCluster, prepareDataDir, takeOverCluster } from './data-folder';
import type { EmbeddedPostgres, EmbeddedPostgresOptions, Log } from './embedded-postgres.interface';
import { EmbeddedPostgresServer } from './embedded-postgres.server';
import { resolveRunAs } from './run-as';
import { checkPort, mergeSettings } from './server-settings';

/** Data folders with a live server started by this process, to refuse a second server on one cluster. */
const activeDataDirs = new Set<string>();

/** Starts a PostgreSQL server on 127.0.0.1 and resolves once it accepts connections. */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const began = Date.now();
  const log: Log = options.log ?? ((): void => undefined);
  const persistent = options.persistent ?? false;
  const settings = mergeSettings(options.settings);
  const { port } = options;
  checkPort(port);
  const runAs = resolveRunAs();
  const binaries = await locateBinaries(runAs, log);
  const dataDir = await prepareDataDir(options.dataDir, persistent, runAs, log);
  if (activeDataDirs.has(dataDir)) {
    throw new Error(`embedded PostgreSQL: ${dataDir} is already in use by this process`);
  }
  activeDataDirs.add(dataDir);

  const release = (): void => void activeDataDirs.delete(dataDir);
  const server = new EmbeddedPostgresServer(binaries, runAs, dataDir, !persistent, settings, log, release);
  try {
    let initNote = '';
    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      const initBegan = Date.now();
      await initCluster(binaries, runAs, dataDir, !persistent);
      initNote = ` (initdb ${Date.now() - initBegan} ms)`;
    } else if (persistent) {
      await takeOverCluster(binaries, runAs, dataDir, log);
    }
    await server.start(port);
    const took = `${Date.now() - began} ms${initNote}`;
    log(`PostgreSQL ${binaries.version} ready at ${server.url} in ${took}, data in ${dataDir}`);
    return server;
  } catch (error) {
    // Leave nothing half-started behind; the original error is the one worth reporting.
    await server.stop().catch(() => undefined);
    throw error;
  }
}
