import v8 from 'node:v8';

/**
 * Bytes `work(count)` allocates on V8's heap per count, exactly (not sampled): the heap used at the end − at the
 * start + what every collection meanwhile freed. For specs that pin what a path allocates against a loop of the
 * same promises without it (their own cost depends on the process: hooks, the test runner).
 */
export async function bytesPer(work: (count: number) => Promise<void>, count: number): Promise<number> {
  const gc = new v8.GCProfiler();
  gc.start();
  const before = v8.getHeapStatistics().used_heap_size;
  await work(count);
  const after = v8.getHeapStatistics().used_heap_size;
  const freed = gc
    .stop()
    .statistics.reduce(
      (sum, { beforeGC, afterGC }) =>
        sum + beforeGC.heapStatistics.usedHeapSize - afterGC.heapStatistics.usedHeapSize,
      0,
    );
  return (after - before + freed) / count;
}
