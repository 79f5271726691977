export { createApp } from "./app.ts";
export { connectApiDeps } from "./deps.ts";
export { CredentialAuthenticator } from "./http/auth.ts";
export { createApiServer } from "./http/server.ts";
export type { ApiDeps } from "./http/types.ts";
