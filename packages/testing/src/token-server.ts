import { createServer, type Server } from "node:http";

/**
 * An OAuth 2.0 token endpoint on loopback (client credentials grant, client_secret_basic), as a
 * receiver's authorization server would be. It issues `tok_<n>` tokens, remembers which are
 * valid, and records every token request; a test can make it slow (`delayMs`), fail (`failWith`)
 * or revoke tokens, and a receiver asks it whether the token it got is valid.
 */
export interface TokenRequest {
  grantType: string | null;
  scope: string | null;
  audience: string | null;
  /** The client id and secret of the Basic header, decoded; null without one. */
  client: { id: string; secret: string } | null;
  at: number;
}

export interface TestTokenServer {
  /** The token url: `${origin}/oauth/token`. */
  url: string;
  requests: TokenRequest[];
  /** Token requests being answered now, and the most there ever were at once. */
  concurrent: number;
  maxConcurrent: number;
  /** expires_in of the tokens issued; undefined leaves it out of the answer. */
  expiresIn: number | undefined;
  delayMs: number;
  /** Answer token requests with this status and `{"error": ...}` instead; undefined to issue tokens. */
  failWith: { status: number; error: string } | undefined;
  isValid(authorization: string | undefined): boolean;
  revokeAll(): void;
  close(): Promise<void>;
}

export async function startTokenServer(client: { id: string; secret: string }): Promise<TestTokenServer> {
  const valid = new Set<string>();
  let issued = 0;
  const state: TestTokenServer = {
    url: "",
    requests: [],
    concurrent: 0,
    maxConcurrent: 0,
    expiresIn: 3600,
    delayMs: 0,
    failWith: undefined,
    isValid: (authorization) => authorization?.startsWith("Bearer ") === true && valid.has(authorization.slice(7)),
    revokeAll: () => valid.clear(),
    close: async () => {},
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      state.concurrent += 1;
      state.maxConcurrent = Math.max(state.maxConcurrent, state.concurrent);
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      let sent: TokenRequest["client"] = null;
      if (basic) {
        const [id = "", secret = ""] = Buffer.from(basic, "base64").toString("utf8").split(":");
        const decode = (value: string) => decodeURIComponent(value.replaceAll("+", " "));
        sent = { id: decode(id), secret: decode(secret) };
      }
      state.requests.push({
        grantType: form.get("grant_type"),
        scope: form.get("scope"),
        audience: form.get("audience"),
        client: sent,
        at: Date.now(),
      });
      const answer = () => {
        state.concurrent -= 1;
        const json = (status: number, body: unknown) =>
          res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
        if (req.method !== "POST" || req.url !== "/oauth/token") return json(404, { error: "not_found" });
        if (state.failWith) return json(state.failWith.status, { error: state.failWith.error });
        if (form.get("grant_type") !== "client_credentials") return json(400, { error: "unsupported_grant_type" });
        if (sent?.id !== client.id || sent.secret !== client.secret) return json(401, { error: "invalid_client" });
        issued += 1;
        const token = `tok_${issued}`;
        valid.add(token);
        return json(200, {
          access_token: token,
          token_type: "Bearer",
          ...(state.expiresIn === undefined ? {} : { expires_in: state.expiresIn }),
        });
      };
      if (state.delayMs > 0) setTimeout(answer, state.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/oauth/token`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
