import { describeServerMatrix, VARIANTS } from '../fakes/server-matrix.js';

/** Issue 21's server matrix (test/fakes/server-matrix.ts), part 2 of 3: variants 6 to 10. */
describeServerMatrix(VARIANTS.slice(5, 10));
