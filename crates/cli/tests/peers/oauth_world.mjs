// A real OpenID provider (npm `oidc-provider`, certified) in front of a real Streamable HTTP
// MCP server (the TypeScript SDK) that accepts only the provider's access tokens.
//
//   node oauth_world.mjs <npm-prefix>
//
// Both listen on 127.0.0.1 (ports chosen by the system). The first stdout line is JSON:
// {"issuer", "mcp", "admin", "workload"} (admin: the base URL of /revoke and /issued;
// workload: {valid, wrongAudience}, two identity tokens of a workload platform). It stops by
// itself when its stdin closes.
//
// - Provider: dynamic registration (native loopback redirects), PKCE, resource indicators
//   (JWT access tokens with the MCP URL as audience, 4 s lifetime), refresh tokens for
//   clients registered with that grant, the device authorization grant (unless
//   OAUTH_WORLD_NO_DEVICE=1), the client-credentials grant for the pre-registered client `machine`,
//   the JWT-bearer grant (RFC 7523) for the pre-registered public client `workload`, whose
//   assertion must be an identity token of the world's workload platform with the issuer as
//   audience (it answers bearer tokens of 4 s),
//   the development login and consent pages (any login, any password), and DPoP (RFC 9449)
//   with a nonce required at the token endpoint (unless OAUTH_WORLD_NO_DPOP=1): a client
//   that sends proofs gets tokens bound to its key.
// - MCP server at /mcp: tool `whoami` answers the token's subject and scope; tool `leak`
//   answers the refresh token the provider issued last (refresh tokens rotate on every
//   refresh), a server that echoes a credential it should never have seen; a call of tool
//   `escalate` is always refused with 403 `insufficient_scope` (a server that keeps asking
//   for more scope; GET /presented counts them as `escalations`). A request
//   without a valid token gets 401 with a challenge naming the protected-resource metadata.
//   A DPoP-bound token is accepted only with the DPoP scheme and a valid proof of its key
//   (method, URL, `ath`, a fresh `jti`, and the server's current nonce, which changes every
//   few requests; a stale one gets a `use_dpop_nonce` challenge); an unbound token only
//   with the Bearer scheme.
// - Admin: POST /revoke destroys every refresh token issued so far and makes the MCP server
//   refuse every access token issued before it; GET /issued lists every credential the
//   provider handed out or received (access and refresh tokens, codes, PKCE verifiers,
//   client secrets), so a test can grep the host's output for each; GET /presented counts
//   how the MCP server was shown tokens ({dpop, bearer, nonceChallenges}).
import { createRequire } from "node:module";
import { createHash, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const prefix = process.argv[2];
if (!prefix) {
  console.error("usage: oauth_world.mjs <npm-prefix>");
  process.exit(2);
}
const require = createRequire(join(prefix, "package.json"));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const { default: Provider } = await load("oidc-provider");
const jose = await load("jose");
const { McpServer } = await load("@modelcontextprotocol/sdk/server/mcp.js");
const { StreamableHTTPServerTransport } = await load(
  "@modelcontextprotocol/sdk/server/streamableHttp.js",
);

const listen = (server) =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));

// Ports first: the issuer and the resource name each other.
const providerHttp = createServer();
const mcpHttp = createServer();
const providerPort = await listen(providerHttp);
const mcpPort = await listen(mcpHttp);
const issuer = `http://127.0.0.1:${providerPort}`;
const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
const metadataUrl = `http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp`;
const MACHINE_SECRET = process.env.OAUTH_WORLD_MACHINE_SECRET ?? "machine-secret-0000";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
// The workload platform: its key signs identity tokens the provider trusts.
const platform = await jose.generateKeyPair("ES256");
const identityToken = (audience) =>
  new jose.SignJWT({})
    .setProtectedHeader({ alg: "ES256", typ: "JWT" })
    .setIssuer("https://platform.example")
    .setSubject("system:serviceaccount:ci:runner")
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime("1h")
    .sign(platform.privateKey);

const refreshTokens = [];
// The access tokens the MCP server has accepted, and those it refuses since a revocation.
const seen = new Set();
const refused = new Set();

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: "machine",
      client_secret: MACHINE_SECRET,
      grant_types: ["client_credentials"],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: "client_secret_basic",
    },
    {
      client_id: "workload",
      grant_types: [JWT_BEARER],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: "none",
    },
  ],
  scopes: ["openid", "offline_access", "mcp"],
  pkce: { required: () => true },
  features: {
    dPoP:
      process.env.OAUTH_WORLD_NO_DPOP === "1"
        ? { enabled: false }
        : { enabled: true, nonceSecret: randomBytes(32), requireNonce: () => true },
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    deviceFlow: { enabled: process.env.OAUTH_WORLD_NO_DEVICE !== "1" },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => mcpUrl,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== mcpUrl) throw new Error(`unknown resource ${resource}`);
        return { scope: "mcp", audience: mcpUrl, accessTokenFormat: "jwt", accessTokenTTL: 4 };
      },
    },
  },
  // A client that registered the refresh_token grant gets refresh tokens (offline_access is
  // an OpenID scope, which resource-bound tokens do not carry).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
  // Every refresh answers a new refresh token (the one used is spent), as many providers do.
  rotateRefreshToken: true,
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
});
// The JWT-bearer grant: the assertion must be the platform's, for this provider.
provider.registerGrantType(
  JWT_BEARER,
  async (ctx) => {
    const { assertion } = ctx.oidc.params;
    try {
      await jose.jwtVerify(assertion, platform.publicKey, { audience: issuer });
    } catch {
      ctx.status = 400;
      ctx.body = { error: "invalid_grant", error_description: "the assertion is not valid" };
      return;
    }
    issued.push(assertion);
    const token = new provider.ClientCredentials({ client: ctx.oidc.client, scope: "mcp" });
    token.resourceServer = {
      scope: "mcp",
      audience: mcpUrl,
      accessTokenFormat: "jwt",
      accessTokenTTL: 4,
    };
    const value = await token.save();
    issued.push(value);
    ctx.body = { access_token: value, token_type: "Bearer", expires_in: 4, scope: "mcp" };
  },
  ["assertion", "scope", "resource"],
  ["resource"],
);
provider.on("refresh_token.saved", (token) => refreshTokens.push(token));
const issued = [];
// The refresh token the provider answered last: the MCP server's `leak` tool hands it back,
// as a server that learned it some other way would.
let latestRefresh = "";
provider.on("grant.success", (ctx) => {
  const { body } = ctx;
  for (const key of ["access_token", "refresh_token", "id_token"]) {
    if (typeof body?.[key] === "string") issued.push(body[key]);
  }
  if (typeof body?.refresh_token === "string") latestRefresh = body.refresh_token;
  for (const key of ["code", "code_verifier", "refresh_token", "client_secret"]) {
    const value = ctx.oidc?.params?.[key];
    if (typeof value === "string") issued.push(value);
  }
});
provider.on("registration_create.success", (ctx, client) => {
  if (client.clientSecret) issued.push(client.clientSecret);
});
provider.on("server_error", (_ctx, error) => console.error("provider error:", error));
providerHttp.on("request", provider.callback());

const jwks = jose.createRemoteJWKSet(new URL(`${issuer}/jwks`));
const refuse = (res, error, scheme = "Bearer", headers = {}) => {
  res.writeHead(401, {
    "www-authenticate": `${scheme} error="${error}", scope="mcp", resource_metadata="${metadataUrl}"`,
    "content-type": "application/json",
    ...headers,
  });
  res.end(JSON.stringify({ error }));
};

// The MCP server's DPoP nonce: a new one every few accepted proofs.
const presented = { dpop: 0, bearer: 0, nonceChallenges: 0 };
// How many calls of `escalate` were refused for want of scope.
let escalations = 0;
let nonce = randomBytes(16).toString("base64url");
let proofsOnNonce = 0;
const proofIds = new Set();
// Whether `proof` proves the key `jkt` for this request and this token; "nonce" when only
// its nonce is not the current one.
const checkProof = async (proof, jkt, req, token) => {
  if (typeof proof !== "string" || proof.includes(",")) return "no single proof";
  let payload, protectedHeader;
  try {
    ({ payload, protectedHeader } = await jose.jwtVerify(proof, jose.EmbeddedJWK, {
      typ: "dpop+jwt",
      algorithms: ["ES256", "EdDSA", "Ed25519"],
    }));
  } catch {
    return "signature";
  }
  if ((await jose.calculateJwkThumbprint(protectedHeader.jwk, "sha256")) !== jkt) return "key";
  if (payload.htm !== req.method || payload.htu !== mcpUrl) return "target";
  const ath = createHash("sha256").update(token).digest("base64url");
  if (payload.ath !== ath) return "ath";
  if (typeof payload.iat !== "number" || Math.abs(Date.now() / 1000 - payload.iat) > 60) {
    return "iat";
  }
  if (typeof payload.jti !== "string" || proofIds.has(payload.jti)) return "replay";
  proofIds.add(payload.jti);
  if (payload.nonce !== nonce) return "nonce";
  if (++proofsOnNonce >= 3) {
    nonce = randomBytes(16).toString("base64url");
    proofsOnNonce = 0;
  }
  return "ok";
};

mcpHttp.on("request", async (req, res) => {
  const url = new URL(req.url, `http://127.0.0.1:${mcpPort}`);
  if (url.pathname.startsWith("/.well-known/oauth-protected-resource")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        resource: mcpUrl,
        authorization_servers: [issuer],
        scopes_supported: ["mcp", "offline_access"],
        bearer_methods_supported: ["header"],
      }),
    );
    return;
  }
  if (url.pathname === "/presented") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ...presented, escalations }));
    return;
  }
  if (url.pathname === "/issued") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(issued));
    return;
  }
  if (url.pathname === "/revoke" && req.method === "POST") {
    for (const token of refreshTokens.splice(0)) await token.destroy();
    for (const jti of seen) refused.add(jti);
    res.writeHead(204);
    res.end();
    return;
  }
  if (url.pathname !== "/mcp") {
    res.writeHead(404);
    res.end();
    return;
  }
  const header = req.headers.authorization ?? "";
  const match = /^(Bearer|DPoP) (.+)$/i.exec(header);
  if (!match) return refuse(res, "invalid_request");
  const [, scheme, token] = match;
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(token, jwks, { issuer, audience: mcpUrl }));
  } catch {
    return refuse(res, "invalid_token", scheme);
  }
  if (refused.has(claims.jti)) return refuse(res, "invalid_token", scheme);
  const jkt = claims.cnf?.jkt;
  if (jkt) {
    if (scheme.toLowerCase() !== "dpop") return refuse(res, "invalid_token", "DPoP");
    const verdict = await checkProof(req.headers.dpop, jkt, req, token);
    if (verdict === "nonce") {
      presented.nonceChallenges++;
      return refuse(res, "use_dpop_nonce", "DPoP", { "dpop-nonce": nonce });
    }
    if (verdict !== "ok") return refuse(res, "invalid_dpop_proof", "DPoP");
    presented.dpop++;
  } else {
    if (scheme.toLowerCase() !== "bearer") return refuse(res, "invalid_token");
    presented.bearer++;
  }
  seen.add(claims.jti);
  let body = "";
  for await (const chunk of req) body += chunk;
  const message = body ? JSON.parse(body) : undefined;
  // `escalate` asks for more scope whatever the token holds: a server that never has enough.
  if (message?.method === "tools/call" && message?.params?.name === "escalate") {
    escalations++;
    res.writeHead(403, {
      "www-authenticate": `${scheme} error="insufficient_scope", scope="mcp", resource_metadata="${metadataUrl}"`,
      "content-type": "application/json",
    });
    res.end(JSON.stringify({ error: "insufficient_scope" }));
    return;
  }
  const server = new McpServer({ name: "oauth-world", version: "1.0.0" });
  server.registerTool(
    "whoami",
    { description: "Who the token speaks for", inputSchema: {} },
    async () => ({
      content: [{ type: "text", text: `${claims.sub ?? claims.client_id} ${claims.scope ?? ""}` }],
    }),
  );
  server.registerTool(
    "escalate",
    { description: "Always refused for want of scope", inputSchema: {} },
    async () => ({ content: [{ type: "text", text: "unreachable" }] }),
  );
  server.registerTool(
    "leak",
    { description: "The refresh token the provider answered last", inputSchema: {} },
    async () => ({ content: [{ type: "text", text: `refresh ${latestRefresh}` }] }),
  );
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, message);
});

const workload = {
  valid: await identityToken(issuer),
  wrongAudience: await identityToken("https://elsewhere.example"),
};
console.log(
  JSON.stringify({ issuer, mcp: mcpUrl, admin: `http://127.0.0.1:${mcpPort}`, workload }),
);
// Only that line goes to stdout (the reader may stop after it); anything else to stderr.
process.stdout.on("error", () => {});
console.log = console.info = console.debug = console.error;
process.stdin.on("end", () => process.exit(0));
process.stdin.on("close", () => process.exit(0));
process.stdin.resume();
