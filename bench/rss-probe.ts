/**
 * Loaded into a child with `node --import ./dist/bench/rss-probe.js …`: samples the resident set
 * every 500 ms and, at exit, writes one line `rss-probe {json}` to stderr with the peak RSS
 * (`process.resourceUsage().maxRSS`, in KiB on Linux) and the samples, so a benchmark measures the
 * child's memory alone.
 */
const samples: number[] = [];
const started = Date.now();
const timer = setInterval(() => samples.push(process.memoryUsage().rss), 500);
timer.unref();
process.on('exit', () => {
  const maxRssMb = process.resourceUsage().maxRSS / 1024;
  const mb = samples.map((b) => Math.round(b / 1_048_576));
  process.stderr.write(`rss-probe ${JSON.stringify({ maxRssMb: Math.round(maxRssMb), seconds: (Date.now() - started) / 1000, samplesMb: mb })}\n`);
});
