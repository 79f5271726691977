export { HttpSender } from "./http-sender.ts";
export { createSafeLookup, DestinationNotAllowedError } from "./safe-lookup.ts";
export { startWorker, type RunningWorker } from "./start-worker.ts";
