/**
 * A tenant id (docs/api.md#tenants): the sender's own name for one of its customers, 1-255 of
 * `A-Z a-z 0-9 _ - . :`, so that it is safe in a URL, a log line and a filter as it is.
 */
export const TENANT_ID_PATTERN = /^[A-Za-z0-9_\-.:]{1,255}$/;
export const TENANT_ID_RULE = "must be 1 to 255 characters of A-Z a-z 0-9 _ - . :";

export function isTenantId(value: string): boolean {
  return TENANT_ID_PATTERN.test(value);
}
