import { describeServerMatrix, VARIANTS } from '../fakes/server-matrix.js';

/** Issue 21's server matrix (test/fakes/server-matrix.ts), part 3 of 3: variants 11 to 15. */
describeServerMatrix(VARIANTS.slice(10, 15));
