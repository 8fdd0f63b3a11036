import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ReportConfig } from '../../config/index.js';
import { systemClock } from '../../core/clock.js';
import { EXIT_CODES, exitCodeFor } from '../../core/exit-codes.js';
import { writeAtomically } from '../../state/store.js';
import { readReport } from '../../reports/report.js';
import { reportHtml } from '../../reports/report-html.js';
import type { CommandIo } from '../../run/io.js';

/**
 * `query-sync report --html FILE`: the run history of the warehouse as one self-contained HTML
 * page (no network when viewed), read from the published copy, so it runs beside a sync.
 */
export async function reportCommand(config: ReportConfig, io: CommandIo): Promise<number> {
  try {
    const data = await readReport(config, (io.clock ?? systemClock).now());
    mkdirSync(dirname(config.html), { recursive: true });
    await writeAtomically(config.html, reportHtml(data));
    io.print(
      `report: ${config.html} (${data.runs.length} run${data.runs.length === 1 ? '' : 's'} of ${data.totalRuns}, ${data.schemaChanges.length} schema changes)`,
    );
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`report FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
