# syntax=docker/dockerfile:1
# The base image is pinned by version (bump both stages together, deliberately).
# Build stage: install all dependencies and compile TypeScript.
FROM node:22.20.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the `prepare` build needs the sources, which are copied next.
RUN npm ci --ignore-scripts
COPY tsconfig.json ./
COPY src ./src
COPY emulator ./emulator
COPY connectors ./connectors
COPY bench ./bench
COPY scripts/build.mjs scripts/bundle.mjs scripts/undici-lean.cjs ./scripts/
# TypeScript, then the CLI as one bundle (dist/bin/cli.js: scripts/bundle.mjs says why).
RUN node scripts/build.mjs && npm prune --omit=dev

# Runtime stage: only production dependencies and the compiled output, as a non-root user.
FROM node:22.20.0-bookworm-slim
# tini as pid 1: it forwards SIGTERM/SIGINT to query-sync (which then stops gracefully: the batch
# being written finishes, state stays consistent, the lease is released) and reaps zombies.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*
# A small young generation keeps a long backfill's memory flatter (docs/duckdb-memory.md).
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=2 \
    QUERY_SYNC_DUCKDB_PATH=/data/warehouse.duckdb \
    QUERY_SYNC_STATE=/data/state/state.json
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN ln -s /app/dist/bin/cli.js /usr/local/bin/query-sync \
    && chmod +x /app/dist/bin/cli.js \
    && mkdir -p /data/state \
    && chown -R node:node /data
USER node
WORKDIR /data
# State and warehouse live on the volume, so a CronJob's runs continue where the last one stopped.
VOLUME ["/data"]
ENTRYPOINT ["/usr/bin/tini", "--", "query-sync"]
CMD ["--help"]
