/**
 * Output lines for a person at a terminal: a line wider than the terminal is not left for the
 * terminal to wrap mid-word (`waited=0.` / `0s`), it is broken at spaces, with the rest indented.
 * Summary fields that say (almost) nothing happened (`retries=0`, `429s=0`, `waited=0.2s`,
 * `backoff=0.0s`: under a second) are dropped from a line that does not fit, before it is broken. JSON lines (`--json`) are kept
 * whole: a scheduler or a person copies them.
 */

/** Fields a narrow terminal can do without: no retries, no 429s, under a second waited or backing off. */
const ZERO_FIELD = /^(?:retries=0|429s=0|waited=0\.\ds|backoff=0\.\ds)$/;

const INDENT = '  ';

export function fitToTerminal(line: string, columns: number | undefined): string[] {
  if (columns === undefined || columns < 20) return [line];
  if (line.includes('\n')) return line.split('\n').flatMap((part) => fitToTerminal(part, columns));
  // One column spare: some terminals wrap a line that fills the last column.
  const width = columns - 1;
  if (line.startsWith('{') || [...line].length <= width) return [line];
  const tokens = line.split(' ');
  const kept = tokens.filter((t) => !ZERO_FIELD.test(t));
  return breakAtSpaces(kept, width);
}

function breakAtSpaces(tokens: readonly string[], width: number): string[] {
  const out: string[] = [];
  let current = '';
  for (const token of tokens) {
    const candidate = current === '' ? token : `${current} ${token}`;
    if ([...candidate].length <= width || current.trim() === '') {
      current = candidate;
      continue;
    }
    out.push(current);
    current = `${INDENT}${token}`;
  }
  if (current !== '') out.push(current);
  // Runs of spaces (column padding) survive as empty tokens; a broken line must not end in them.
  return out.map((l) => l.trimEnd());
}
