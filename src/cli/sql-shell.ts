import { createInterface } from 'node:readline';
import { EXIT_CODES } from '../core/exit-codes.js';
import type { CommandIo } from '../run/io.js';
import { render, runOn, type SqlFormat } from '../publish/sql.js';

/** A line-based shell: a statement ends with `;` (or at the end of a line when none is open); `.quit` leaves. */
export async function shell(path: string, format: SqlFormat, io: CommandIo): Promise<number> {
  io.print(
    `query-sync sql on ${path} (the published copy; each statement reads the newest publish). End statements with ;  .quit to leave.`,
  );
  const rl = createInterface({
    input: process.stdin,
    output: process.stdout,
    prompt: 'sql> ',
    terminal: process.stdin.isTTY === true,
  });
  let pending = '';
  rl.prompt();
  for await (const line of rl) {
    const text = line.trim();
    if (pending === '' && (text === '.quit' || text === '.exit' || text === '\\q')) break;
    pending = pending === '' ? text : `${pending}\n${text}`;
    if (pending !== '' && (pending.endsWith(';') || !process.stdin.isTTY)) {
      const sql = pending;
      pending = '';
      try {
        for (const out of render(await runOn(path, sql), format)) io.print(out);
      } catch (error) {
        io.print(`error: ${(error as Error).message}`);
      }
    }
    rl.setPrompt(pending === '' ? 'sql> ' : '...> ');
    rl.prompt();
  }
  rl.close();
  return EXIT_CODES.ok;
}
