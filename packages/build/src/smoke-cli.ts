// `tsx packages/build/src/smoke-cli.ts --api <url> --worker <url>`: waits until a running API and
// worker answer their probes, then runs the smoke test against them (see smoke.ts). The API key
// and Bull Board's credentials come from the environment (SMOKE_API_KEY, SMOKE_ADMIN_USERNAME,
// SMOKE_ADMIN_PASSWORD), not the command line, which `ps` shows. Used by .ci/image-smoke.
import { parseArgs } from "node:util";
import { waitFor } from "@webhooks/testing";
import { smokeTest } from "./smoke.ts";

const { values } = parseArgs({ options: { api: { type: "string" }, worker: { type: "string" } } });
const { SMOKE_API_KEY: apiKey, SMOKE_ADMIN_USERNAME: username, SMOKE_ADMIN_PASSWORD: password } = process.env;
if (!values.api || !values.worker || !apiKey || !username || !password) {
  console.error(
    "Usage: SMOKE_API_KEY=... SMOKE_ADMIN_USERNAME=... SMOKE_ADMIN_PASSWORD=... smoke-cli.ts --api <url> --worker <url>",
  );
  process.exit(2);
}

const answers = async (url: string) => (await fetch(url, { signal: AbortSignal.timeout(2_000) })).status === 200;
try {
  await waitFor(() => answers(`${values.api}/readyz`), {
    timeoutMs: 120_000,
    intervalMs: 250,
    what: "the API's /readyz",
  });
  await waitFor(() => answers(`${values.worker}/healthz`), {
    timeoutMs: 120_000,
    intervalMs: 250,
    what: "the worker's /healthz",
  });
  const steps = await smokeTest({
    apiUrl: values.api,
    workerUrl: values.worker,
    apiKey,
    admin: { username, password },
  });
  for (const step of steps) console.log(`ok  ${step.name}: ${step.detail.slice(0, 160)}`);
} catch (error) {
  console.error(`smoke test failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
