/**
 * How the portal presents itself (docs/portal.md#branding): the deployment's PORTAL_NAME,
 * PORTAL_LOGO_URL and PORTAL_RETURN_URL, as the configuration checked them (a logo from this
 * origin or a data: URL only, so the page's CSP holds).
 */
export interface PortalBranding {
  name: string;
  logoUrl: string | undefined;
  back: { url: string; label: string } | undefined;
}

/**
 * Where the page's title and the deployment's branding go in the bundle's HTML (brandedPage fills
 * it in): the bundle is the same for every deployment, and may be built ahead of time.
 */
export const BRANDING_SLOT = "<!-- branding -->";

export const DEFAULT_BRANDING: PortalBranding = { name: "Webhooks", logoUrl: undefined, back: undefined };

/** The names of the meta tags the page reads its branding from (page/branding.ts). */
export const BRANDING_META = {
  name: "portal-name",
  logo: "portal-logo",
  backUrl: "portal-back-url",
  backLabel: "portal-back-label",
} as const;

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

const meta = (name: string, content: string) => `<meta name="${name}" content="${escapeHtml(content)}">`;

/**
 * The page with the deployment's branding in it: the title, and meta tags the page's script
 * reads. Data in the markup rather than an inline script, which the CSP forbids.
 */
export function brandedPage(html: string, branding: PortalBranding): string {
  const tags = [`<title>${escapeHtml(branding.name)}</title>`, meta(BRANDING_META.name, branding.name)];
  if (branding.logoUrl) tags.push(meta(BRANDING_META.logo, branding.logoUrl));
  if (branding.back)
    tags.push(meta(BRANDING_META.backUrl, branding.back.url), meta(BRANDING_META.backLabel, branding.back.label));
  return html.replace(BRANDING_SLOT, tags.join("\n"));
}
