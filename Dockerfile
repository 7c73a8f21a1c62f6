# syntax=docker/dockerfile:1
# Multi-stage: type-check and compile with dev dependencies, ship only dist/ and production dependencies
# on Node 24 LTS, as a non-root user; the chart runs it with a read-only root filesystem.
# NODE_BASE: where no registry is reachable, hack/image/build.sh makes an equivalent base from Debian packages and the
# npm registry's Node and passes it here.
ARG NODE_BASE=node:24-bookworm-slim
FROM ${NODE_BASE} AS build
# A CA bundle for a TLS-inspecting proxy in front of the npm registry, for the install steps only (never in the image).
ARG NODE_EXTRA_CA_CERTS=
WORKDIR /src
# `npm install --no-save` installs the locked versions like `npm ci`, but tolerates a lock file written against
# a registry mirror without other platforms' optional binaries (see scripts/bootstrap.mjs).
COPY package.json package-lock.json ./
RUN npm install --no-save --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM ${NODE_BASE} AS runtime
ARG NODE_EXTRA_CA_CERTS=
ENV NODE_ENV=production
# jemalloc for native memory (see below).
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-save --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist ./dist
COPY scripts/image-entrypoint.sh ./entrypoint.sh
# The one catalog (config/catalog/catalog.json): the default of `gateway` and `explain` when --catalog is not given.
COPY config/catalog ./config/catalog
# V8 heap sizing per process (docs/gateway.md, "Runtime flags"), chosen by the entrypoint from the subcommand unless
# NODE_OPTIONS is set. The operator and the API (`run`, `operator`, `api`): a 16 MiB young generation (8 MiB
# semi-spaces; 16 cost ~20–28 MB more peak RSS at 10k credentials for no measurable speed-up, the operator mostly
# waits on the apiserver) and an old generation capped at 256 MiB, which keeps V8's heap growth tight; sized for the
# chart's default 384Mi limit (up to ~30k credentials, measured, docs/operator.md "Scale"); the chart's
# operator.nodeOptions raises the cap together with the limit. The gateway allocates per request and keeps
# almost none of it past a scavenge: an 8 MiB semi-space (16 MiB young generation), a 128 MiB old-generation cap
# that bounds its RSS, and one V8 worker thread (with V8's default four, their wake-ups preempted the event loop on a
# one-core pod). Measured beside 16 and 32 MiB semi-spaces, Node's defaults and the operator's flags (docs/gateway.md,
# "Runtime flags", has the table): the lowest p99 of the capped settings, at 120 MB of RSS. Native memory comes from
# jemalloc, which hands freed pages back to the kernel after a second: under glibc's malloc, a 100k-credential operator held ~40 MB of freed native memory
# (malloc_trim released it) that never left the process. MALLOC_ARENA_MAX=2 only matters where jemalloc is absent
# (two glibc arenas instead of 8 per core). bench/peers.ts and bench/operator.ts run with these same lines.
ENV BYOK_OPERATOR_NODE_OPTIONS="--max-semi-space-size=8 --max-old-space-size=256"
# The API (`api`) caches the BYOK objects and management-key Secrets (not the credential Secrets) and serves requests:
# its own line, today the operator's values (not tuned separately yet: docs/gateway.md, "Runtime flags").
ENV BYOK_API_NODE_OPTIONS="--max-semi-space-size=8 --max-old-space-size=256"
ENV BYOK_GATEWAY_NODE_OPTIONS="--max-semi-space-size=8 --max-old-space-size=128 --v8-pool-size=1"
ENV LD_PRELOAD="libjemalloc.so.2"
ENV MALLOC_CONF="background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:2"
ENV MALLOC_ARENA_MAX=2
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["/app/entrypoint.sh"]
CMD ["run"]
