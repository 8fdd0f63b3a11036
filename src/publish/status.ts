import { layoutOf } from './layout.js';
import { readManifest, type Manifest } from './manifest.js';

/** What `status` says of the published read copy: as of when, and how far behind now. */
export interface PublishedStatus {
  readonly path: string;
  readonly parquet: string;
  readonly publish: number | null;
  readonly asOf: string | null;
  /** Seconds between the copy's as-of time and now: what readers miss. */
  readonly lagSeconds: number | null;
  readonly runId: string | null;
  readonly tables: number;
}

export function publishedStatus(path: string, nowMs: number): PublishedStatus {
  const layout = layoutOf(path);
  let manifest: Manifest | undefined;
  try {
    manifest = readManifest(layout.manifest);
  } catch {
    manifest = undefined;
  }
  return {
    path: layout.published,
    parquet: layout.files,
    publish: manifest?.publish ?? null,
    asOf: manifest?.asOf ?? null,
    lagSeconds: manifest === undefined ? null : Math.max(0, Math.round((nowMs - Date.parse(manifest.asOf)) / 1000)),
    runId: manifest?.runId ?? null,
    tables: manifest === undefined ? 0 : Object.keys(manifest.tables).length,
  };
}

export function publishedLine(p: PublishedStatus): string {
  if (p.asOf === null)
    return `Published copy: none yet at ${p.path} (a sync publishes at its end and every --publish-every)`;
  return `Published copy: ${p.path} as of ${p.asOf} (lag ${formatLag(p.lagSeconds ?? 0)}; publish ${p.publish ?? '?'}, ${p.tables} tables; Parquet in ${p.parquet})`;
}

function formatLag(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}
