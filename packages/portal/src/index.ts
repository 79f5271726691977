export { PORTAL_CSP, PORTAL_PATH, portalRoutes } from "./routes.ts";
