import type { SyncConfig } from '../config.js';
import { Capabilities } from '../pipeline/capabilities.js';
import { checkApi, type CheckReport } from '../pipeline/check.js';
import { readStateDocument } from './state-home.js';
import { createRuntime } from './runtime.js';
import type { CommandIo } from './io.js';

/**
 * What `query-sync check` finds: one request per endpoint and project scope (first pages only,
 * nothing written, no lock taken), with the projects and capabilities the state knows, if any.
 */
export async function checkReport(config: SyncConfig, io: CommandIo): Promise<CheckReport> {
  const runtime = createRuntime({ ...config, progress: 'off' }, io);
  try {
    const doc = await readStateDocument(config, runtime.logger, {}).catch(() => undefined);
    return await checkApi(
      {
        resources: config.resources,
        project: config.project,
        projectIds: config.projectIds,
        knownProjects: doc?.projects ?? [],
        signal: io.signal,
        searches: config.searches,
        aggregates: config.aggregates,
        aggregatesInterval: config.aggregatesInterval,
        recordedCapabilities: doc === undefined ? {} : Capabilities.facts({ document: doc }),
      },
      runtime.client,
    );
  } finally {
    await runtime.close().catch(() => undefined);
  }
}
