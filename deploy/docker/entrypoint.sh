#!/bin/sh
# The image's entry point (docs/deployment.md#the-container-image). One image, several roles:
#   api (the default)   the HTTP API            worker        a delivery worker
#   migrate             apply migrations, exit  keys ...      manage API keys (keys --help)
#   healthcheck         the image's HEALTHCHECK: /healthz of whichever role runs here
# Anything else runs as given (`sh`, `node -e ...`). `exec` leaves node as PID 1, where it
# receives SIGTERM itself and drains what it has in flight before exiting.
set -eu
role="${1:-api}"
[ "$#" -gt 0 ] && shift
case "$role" in
  api) exec node /app/apps/api/dist/main.js "$@" ;;
  worker) exec node /app/apps/worker/dist/main.js "$@" ;;
  migrate) exec node /app/apps/api/dist/migrate.js "$@" ;;
  keys) exec node /app/apps/api/dist/keys.js "$@" ;;
  healthcheck)
    # A container runs one role: the API answers on PORT, a worker on WORKER_METRICS_PORT.
    exec node -e '
      const ports = [process.env.PORT || "3000", process.env.WORKER_METRICS_PORT || "3001"];
      const alive = (port) =>
        fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(3000) }).then((r) => r.ok, () => false);
      Promise.all(ports.map(alive)).then((answers) => process.exit(answers.includes(true) ? 0 : 1));
    ' ;;
  *) exec "$role" "$@" ;;
esac
