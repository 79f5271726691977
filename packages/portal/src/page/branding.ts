import { BRANDING_META, DEFAULT_BRANDING, type PortalBranding } from "../branding.ts";

const metaContent = (name: string): string | undefined =>
  document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content || undefined;

/** The deployment's branding, as the server wrote it into the page (docs/portal.md#branding). */
export function readBranding(): PortalBranding {
  const backUrl = metaContent(BRANDING_META.backUrl);
  const backLabel = metaContent(BRANDING_META.backLabel);
  return {
    name: metaContent(BRANDING_META.name) ?? DEFAULT_BRANDING.name,
    logoUrl: metaContent(BRANDING_META.logo),
    back: backUrl && backLabel ? { url: backUrl, label: backLabel } : undefined,
  };
}
