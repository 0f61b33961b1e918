/**
 * CPU spent by work that runs in this process: the process's own (`process.cpuUsage()`, user + system) and its
 * PostgreSQL backends' (from /proc, by `application_name`), between `start` and `stop`. Nothing is subtracted:
 * the harness's own share (timers, the bench's clock) is paid alike by every system measured this way.
 */
import { cpuSpentMs, readBackendCpu, type BackendCpuSample, type RowsQuery } from './backend-cpu';
import type { CpuProfile } from '../workers/relay-worker.protocol';

export class CpuMeter {
  private constructor(
    private readonly query: RowsQuery,
    private readonly applicationNames: readonly string[],
    private readonly backendsBefore: BackendCpuSample,
    private readonly nodeBefore: NodeJS.CpuUsage,
  ) {}

  /** Reads the backends first, then this process: the read's own CPU falls outside the measurement. */
  static async start(query: RowsQuery, applicationNames: readonly string[]): Promise<CpuMeter> {
    const backends = await readBackendCpu(query, applicationNames);
    return new CpuMeter(query, applicationNames, backends, process.cpuUsage());
  }

  /** CPU since `start`; `postgresMs` is null when the server's processes cannot be read. */
  async stop(): Promise<CpuProfile> {
    const node = process.cpuUsage(this.nodeBefore);
    const backends = await readBackendCpu(this.query, this.applicationNames);
    return {
      nodeMs: (node.user + node.system) / 1000,
      postgresMs: cpuSpentMs(this.backendsBefore, backends),
    };
  }
}
