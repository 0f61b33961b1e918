/** V8's sampled allocations, for the decision scripts that say where bytes go (`HEAP_SAMPLES=<file>`). */

/** Writes V8's sampled allocations over `work` (collected objects included) to `file`, as a .heapprofile. */
export async function sampleAllocations(file: string, work: () => Promise<unknown>): Promise<void> {
  const { Session } = await import('node:inspector');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object): Promise<unknown> =>
    new Promise((resolve, reject) =>
      session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
    );
  await post('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await work();
  const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
  writeFileSync(file, JSON.stringify(profile));
  session.disconnect();
}
