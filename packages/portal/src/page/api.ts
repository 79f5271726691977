import createClient from "openapi-fetch";

export const createPortalClient = (token: string) => createClient({ baseUrl: location.origin, headers: { authorization: `Bearer ${token}` } });
