import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { lastSuccessIn } from './metrics.js';

/**
 * node_exporter's textfile collector reads every `*.prom` file of its folder at each scrape: the
 * file is written beside itself under another name and renamed over the old one, so a scrape reads
 * the whole of one run's metrics or the whole of the previous one's, never half
 * (https://github.com/prometheus/node_exporter#textfile-collector).
 */
export async function writeMetricsFile(path: string, text: string): Promise<void> {
  const temp = `${path}.${process.pid}.tmp`;
  try {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(temp, text);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
}

/** The last success the file holds (ms): what a failed run writes again. */
export async function lastSuccessInFile(path: string): Promise<number | undefined> {
  const text = await readFile(path, 'utf8').catch(() => undefined);
  return text === undefined ? undefined : lastSuccessIn(text);
}
