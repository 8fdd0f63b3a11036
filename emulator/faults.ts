/**
 * Fault injection: one seeded draw per accepted request decides whether it gets a fault and which.
 */

import { Random } from './random.js';

export type FaultKind = 'http500' | 'http503_html' | 'reset' | 'slow' | 'duplicate_row' | 'truncated';

const FAULT_KINDS: readonly FaultKind[] = ['http500', 'http503_html', 'reset', 'slow', 'duplicate_row', 'truncated'];

export interface FaultOptions {
  /** Probability (0..1) that a request gets a fault. */
  rate: number;
  /** Kinds to draw from, uniformly. @default all kinds */
  kinds?: FaultKind[];
  /** Delay of the `slow` fault, in ms. @default 300 */
  slowMs?: number;
  /**
   * Share of new events (`addEvents`, and seeded events in the last `lateMs`) that become visible only
   * `lateMs` after their timestamp. @default 0
   */
  lateRate?: number;
  /** @default 2000 */
  lateMs?: number;
}

export const DEFAULT_SLOW_MS = 300;
export const DEFAULT_LATE_MS = 2000;

export class FaultPicker {
  private readonly rng: Random;

  constructor(seed: number) {
    this.rng = new Random(seed);
  }

  /** The fault for this request, if any. A single draw picks both whether and which. */
  draw(options: FaultOptions | undefined): FaultKind | undefined {
    if (!options || !(options.rate > 0)) return undefined;
    const kinds = options.kinds && options.kinds.length > 0 ? options.kinds : FAULT_KINDS;
    const u = this.rng.next();
    const rate = Math.min(1, options.rate);
    if (u >= rate) return undefined;
    return kinds[Math.min(kinds.length - 1, Math.floor((u / rate) * kinds.length))];
  }
}

export const HTML_503 = `<!DOCTYPE html>
<html>
<head><title>503 Service Temporarily Unavailable</title></head>
<body>
<center><h1>503 Service Temporarily Unavailable</h1></center>
<hr><center>nginx</center>
</body>
</html>
`;
