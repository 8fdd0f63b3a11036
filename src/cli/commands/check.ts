import type { SyncConfig } from '../../config/index.js';
import { Capabilities } from '../../sync/capabilities.js';
import { checkApi, checkExitCode, type CheckReport } from '../../reports/check.js';
import { readStateDocument } from '../../run/state-home.js';
import { createRuntime } from '../../run/runtime.js';
import type { CommandIo } from '../../run/io.js';
import { exitCodeFor } from '../../core/exit-codes.js';
import { formatCheck } from '../../reports/text.js';

/**
 * What `query-sync check` finds: one request per endpoint and project scope (first pages only,
 * nothing written, no lock taken), with the projects and capabilities the state knows, if any.
 */
async function checkReport(config: SyncConfig, io: CommandIo): Promise<CheckReport> {
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

/**
 * `query-sync check`: one request per endpoint and project scope (first pages only, nothing
 * written, no lock taken), and what they say. Exit codes as for sync: 0 all well, 3 key or project
 * refused, 1 anything else that failed, 2 configuration.
 */
export async function checkCommand(config: SyncConfig, io: CommandIo): Promise<number> {
  const print = io.print;
  try {
    const report = await checkReport(config, io);
    const code = checkExitCode(report);
    if (config.json) print(JSON.stringify({ command: 'check', exitCode: code, ...report }));
    else for (const line of formatCheck(report, config)) print(line);
    return code;
  } catch (error) {
    print(`check FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
