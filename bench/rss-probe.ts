/**
 * Loaded into a child with `node --import ./dist/bench/rss-probe.js …`: samples the resident set
 * every 100 ms (keeping every fifth) and, at exit, writes one line `rss-probe {json}` to stderr with the peak RSS
 * (`process.resourceUsage().maxRSS`, in KiB on Linux), the CPU time (user + system, seconds) and the samples, so a benchmark measures the
 * child's memory alone. `heapMb` samples the V8 heap (committed) beside each RSS sample, so the
 * rest (Node, DuckDB's native memory) can be told apart; `peakSample` is the largest sample, when it was taken, and the heap and V8's external memory (Buffers) then.
 */
const samples: number[] = [];
const heap: number[] = [];
const started = Date.now();
let tick = 0;
let peak = { rss: 0, heap: 0, external: 0, second: 0 };
const timer = setInterval(() => {
  const m = process.memoryUsage();
  if (m.rss > peak.rss)
    peak = { rss: m.rss, heap: m.heapTotal, external: m.external, second: (Date.now() - started) / 1000 };
  if (tick++ % 5 !== 0) return;
  samples.push(m.rss);
  heap.push(m.heapTotal);
}, 100);
timer.unref();
process.on('exit', () => {
  const usage = process.resourceUsage();
  const maxRssMb = usage.maxRSS / 1024;
  const cpuSeconds = (usage.userCPUTime + usage.systemCPUTime) / 1e6;
  const mb = (bytes: number[]): number[] => bytes.map((b) => Math.round(b / 1_048_576));
  process.stderr.write(
    `rss-probe ${JSON.stringify({ maxRssMb: Math.round(maxRssMb), seconds: (Date.now() - started) / 1000, cpuSeconds: Math.round(cpuSeconds * 10) / 10, samplesMb: mb(samples), heapMb: mb(heap), peakSample: { rssMb: mb([peak.rss])[0], heapMb: mb([peak.heap])[0], externalMb: mb([peak.external])[0], second: peak.second } })}\n`,
  );
});
