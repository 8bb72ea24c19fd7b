import { randomUUID } from 'node:crypto';
import type http from 'node:http';

/**
 * A small OAuth 2.1 authorization server and bearer check, on the MCP server's own origin, for tests of
 * the client's authorization (`gate` of `startSdkServer`): protected-resource metadata (RFC 9728),
 * authorization-server metadata (RFC 8414), an authorization endpoint that approves at once (redirects to
 * `redirect_uri` with a code), and a token endpoint for the `authorization_code` and `refresh_token`
 * grants. The MCP endpoint answers 401 with a `WWW-Authenticate` challenge to a missing, unknown or
 * expired token. Enough for the SDK's `auth()`; not a real authorization server (no PKCE check).
 */
export class TestAuthorizationServer {
  /** Tokens the MCP endpoint accepts. */
  private readonly valid = new Set<string>();
  private readonly refreshTokens = new Set<string>();
  /** Token endpoint requests, by grant type. */
  readonly grants = new Map<string, number>();
  /** Requests to the MCP endpoint answered 401, with the method and Last-Event-ID they carried. */
  readonly challenged: Array<{ method: string; lastEventId?: string }> = [];
  /** Every MCP request let through, with its Last-Event-ID. */
  readonly admitted: Array<{ method: string; lastEventId?: string; token: string }> = [];
  /** When false, the token endpoint refuses refresh tokens (the user must authorize again). */
  refreshAllowed = true;

  /** Every token issued so far stops being accepted, as at expiry. */
  expireAll(): void {
    this.valid.clear();
  }

  /** The `gate` for `startSdkServer`. */
  readonly gate = (req: http.IncomingMessage, res: http.ServerResponse, mcpUrl: string): boolean => {
    const origin = new URL(mcpUrl).origin;
    const path = new URL(req.url ?? '/', origin).pathname;
    if (path.startsWith('/.well-known/oauth-protected-resource')) {
      json(res, 200, { resource: mcpUrl, authorization_servers: [origin] });
      return true;
    }
    if (path === '/.well-known/oauth-authorization-server') {
      json(res, 200, {
        issuer: origin,
        authorization_endpoint: `${origin}/authorize`,
        token_endpoint: `${origin}/token`,
        response_types_supported: ['code'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['none'],
      });
      return true;
    }
    if (path === '/authorize') {
      const query = new URL(req.url ?? '/', origin).searchParams;
      const to = new URL(query.get('redirect_uri') ?? 'http://localhost/callback');
      to.searchParams.set('code', `code-${randomUUID()}`);
      const state = query.get('state');
      if (state) to.searchParams.set('state', state);
      res.writeHead(302, { location: to.href }).end();
      return true;
    }
    if (path === '/token') {
      void this.token(req, res);
      return true;
    }
    if (path !== new URL(mcpUrl).pathname) return false;
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const lastEventId = header(req, 'last-event-id');
    if (token === undefined || !this.valid.has(token)) {
      this.challenged.push({ method: req.method ?? '', lastEventId });
      req.resume();
      res
        .writeHead(401, {
          'www-authenticate': `Bearer error="invalid_token", resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
          'content-type': 'application/json',
        })
        .end(JSON.stringify({ error: 'invalid_token' }));
      return true;
    }
    this.admitted.push({ method: req.method ?? '', lastEventId, token });
    return false;
  };

  private async token(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += chunk;
    const form = new URLSearchParams(text);
    const grant = form.get('grant_type') ?? '';
    this.grants.set(grant, (this.grants.get(grant) ?? 0) + 1);
    if (grant === 'refresh_token') {
      const refresh = form.get('refresh_token') ?? '';
      if (!this.refreshAllowed || !this.refreshTokens.has(refresh)) {
        json(res, 400, { error: 'invalid_grant' });
        return;
      }
      json(res, 200, this.issue(refresh));
      return;
    }
    if (grant === 'authorization_code' && form.get('code')?.startsWith('code-')) {
      const refresh = `refresh-${randomUUID()}`;
      this.refreshTokens.add(refresh);
      json(res, 200, this.issue(refresh));
      return;
    }
    json(res, 400, { error: 'unsupported_grant_type' });
  }

  private issue(refresh: string) {
    const access = `access-${randomUUID()}`;
    this.valid.add(access);
    return { access_token: access, token_type: 'Bearer', expires_in: 3600, refresh_token: refresh };
  }
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
