export { createApp } from "./app.ts";
export { CredentialAuthenticator } from "./http/auth.ts";
export type { ApiDeps } from "./http/types.ts";
export { connectApiDeps } from "./deps.ts";
export { createApiServer } from "./http/server.ts";
