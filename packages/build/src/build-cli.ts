// `npm run build`: compiles the API and the worker for production (docs/deployment.md#the-compiled-build).
import { fileURLToPath } from "node:url";
import { buildService } from "./build.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

try {
  const files = await buildService(ROOT);
  for (const file of files) console.log(`${file.path}  ${(file.bytes / 1024).toFixed(1)} KiB`);
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
