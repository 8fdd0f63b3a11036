import { describeServerMatrix, VARIANTS } from '../fakes/server-matrix.js';

/** The server matrix (test/fakes/server-matrix.ts), part 4 of 4: issue 31's counts that lag and deletions at the source. */
describeServerMatrix(VARIANTS.slice(15));
