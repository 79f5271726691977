export { DEFAULT_BRANDING, type PortalBranding } from "./branding.ts";
export { buildPortal, type PortalAsset, type PortalBundle } from "./bundle.ts";
export { PORTAL_CSP, PORTAL_PATH, portalRoutes } from "./routes.ts";
