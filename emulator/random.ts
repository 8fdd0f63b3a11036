/**
 * Seeded pseudo-random numbers (mulberry32). Small, fast, and the same sequence for the same seed on
 * every platform, which is what makes the emulator's data reproducible.
 */

export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.next() * items.length)];
    if (item === undefined) throw new Error('Random.pick: empty list');
    return item;
  }

  /** Up to `max` distinct items, at least one. */
  pickSome<T>(items: readonly T[], max: number): T[] {
    const count = this.int(1, Math.min(max, items.length));
    const chosen = new Set<T>();
    while (chosen.size < count) chosen.add(this.pick(items));
    return [...chosen];
  }

  /** `digits` lowercase hex digits. */
  hex(digits: number): string {
    return this.token('', digits);
  }

  /** `prefix`, `digits` random hex digits, then `suffix`, as one flat string. */
  token(prefix: string, digits: number, suffix = ''): string {
    const codes = new Array<number>(prefix.length + digits + suffix.length);
    for (let i = 0; i < prefix.length; i++) codes[i] = prefix.charCodeAt(i);
    this.fillHex(codes, prefix.length, prefix.length + digits);
    for (let i = 0; i < suffix.length; i++) codes[prefix.length + digits + i] = suffix.charCodeAt(i);
    return String.fromCharCode(...codes);
  }

  /** A version-4-shaped UUID. */
  uuid(): string {
    const codes = new Array<number>(36);
    this.fillHex(codes, 0, 36);
    codes[8] = codes[13] = codes[18] = codes[23] = DASH;
    codes[14] = HEX_CODES[4]!;
    codes[19] = HEX_CODES[8 + this.int(0, 3)]!;
    return String.fromCharCode(...codes);
  }

  /** Strings are built from char codes: concatenation makes rope strings, which cost memory per id. */
  private fillHex(codes: number[], from: number, to: number): void {
    let word = 0;
    for (let i = from; i < to; i++) {
      if ((i - from) % 8 === 0) word = Math.floor(this.next() * 4294967296);
      codes[i] = HEX_CODES[word & 15]!;
      word >>>= 4;
    }
  }
}

const HEX_CODES: readonly number[] = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
const DASH = 45;

/** A seed derived from `seed` and a label, so independent streams (per project, faults) do not interfere. */
export function deriveSeed(seed: number, label: string): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (let i = 0; i < label.length; i++) {
    h = Math.imul(h ^ label.charCodeAt(i), 0x01000193) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  return h >>> 0;
}
