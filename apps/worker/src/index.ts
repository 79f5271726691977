export { HttpSender } from "./http-sender.ts";
export { createSafeLookup, DestinationNotAllowedError } from "./safe-lookup.ts";
export { type RunningWorker, startWorker } from "./start-worker.ts";
