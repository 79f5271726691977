# syntax=docker/dockerfile:1
# The service's container image: one image for both roles, `api` (the default command) and
# `worker`, plus `migrate` and `keys`. docs/deployment.md says how to build, run and probe it.
#
#   docker build -t webhook-delivery-service .
#   docker run --env-file .env webhook-delivery-service api
#   docker run --env-file .env webhook-delivery-service worker

# Build: install everything, compile (npm run build), then keep only the production dependencies.
FROM node:20.20.2-bookworm-slim AS build
ENV NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /src
COPY . .
# Install scripts are skipped: the Prisma client is generated into the repository, Prisma needs no
# engine at run time, and nothing here compiles native code. The prune also drops optional and
# peer dependencies: @prisma/client names Prisma's CLI and TypeScript as optional peers, which
# --omit=dev alone keeps (about 250 MB), and the only other optional one is msgpackr-extract, a
# native speed-up that BullMQ's msgpackr does without. Our own workspaces are bundled into dist/,
# so their links in node_modules are left out.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund \
 && npm run build \
 && npm prune --omit=dev --omit=optional --omit=peer --ignore-scripts --no-audit --no-fund \
 && mkdir -p /out/apps/api /out/apps/worker /out/prisma \
 && mv apps/api/dist /out/apps/api/ \
 && mv apps/worker/dist /out/apps/worker/ \
 && mv prisma/migrations /out/prisma/ \
 && mv package.json LICENSE node_modules /out/ \
 && rm -rf /out/node_modules/@webhooks /out/node_modules/.bin

# Run: Node, the compiled programs, their production dependencies and the migrations; no
# TypeScript, tsx or build tools. The layout is the repository's, which the programs rely on to
# find prisma/migrations.
FROM node:20.20.2-bookworm-slim
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="webhook-delivery-service" \
      org.opencontainers.image.description="An open webhook sender: subscriptions, signed deliveries, retries and a delivery log" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.documentation="docs/deployment.md"
ENV NODE_ENV=production
RUN groupadd --gid 10001 webhooks \
 && useradd --uid 10001 --gid webhooks --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin webhooks
WORKDIR /app
COPY --from=build /out /app
COPY deploy/docker/entrypoint.sh /usr/local/bin/webhooks
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 10001:10001
# The API (PORT) and the worker's /metrics and /healthz (WORKER_METRICS_PORT).
EXPOSE 3000 3001
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["webhooks", "healthcheck"]
ENTRYPOINT ["webhooks"]
CMD ["api"]
