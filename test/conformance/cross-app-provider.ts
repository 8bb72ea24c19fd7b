import {
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  type OAuthClientProvider,
} from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

/** What the conformance suite's `auth/cross-app-access-complete-flow` scenario hands its client. */
export interface CrossAppContext {
  readonly client_id: string;
  readonly client_secret: string;
  readonly idp_client_id: string;
  readonly idp_id_token: string;
  readonly idp_token_endpoint: string;
}

/**
 * An application's provider for Enterprise-Managed Authorization (SEP-990), which SDK 1.32.2 has no
 * provider for: its token request is a JWT bearer grant whose assertion (an ID-JAG) it first obtains from
 * the enterprise IdP by token exchange (RFC 8693) for the MCP server's authorization server. Discovery,
 * client authentication (client_secret_basic) and the token request itself are the SDK's `auth()`; the
 * provider only prepares the grant, as the SDK's `ClientCredentialsProvider` does.
 */
export class CrossAppAccessProvider implements OAuthClientProvider {
  private saved: OAuthTokens | undefined;
  private client: OAuthClientInformationMixed;

  constructor(
    private readonly serverUrl: URL,
    private readonly context: CrossAppContext,
  ) {
    this.client = { client_id: context.client_id, client_secret: context.client_secret };
  }

  get redirectUrl(): undefined {
    return undefined;
  }

  get clientMetadata() {
    return {
      client_name: 'mcp-continuity cross-app client',
      redirect_uris: [],
      grant_types: ['urn:ietf:params:oauth:grant-type:jwt-bearer'],
      token_endpoint_auth_method: 'client_secret_basic',
    };
  }

  clientInformation(): OAuthClientInformationMixed {
    return this.client;
  }

  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.client = info;
  }

  tokens(): OAuthTokens | undefined {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }

  redirectToAuthorization(): void {
    throw new Error('no user authorization in the cross-app access flow');
  }

  saveCodeVerifier(): void {}

  codeVerifier(): string {
    throw new Error('no code verifier in the cross-app access flow');
  }

  async prepareTokenRequest(): Promise<URLSearchParams> {
    const resource = await discoverOAuthProtectedResourceMetadata(this.serverUrl);
    const issuer = resource.authorization_servers?.[0];
    if (!issuer) throw new Error('the protected resource names no authorization server');
    const metadata = await discoverAuthorizationServerMetadata(issuer);
    const exchange = await fetch(this.context.idp_token_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        requested_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
        audience: metadata?.issuer ?? issuer,
        resource: resource.resource,
        subject_token: this.context.idp_id_token,
        subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
        client_id: this.context.idp_client_id,
      }),
    });
    if (!exchange.ok) throw new Error(`token exchange at the IdP failed: HTTP ${exchange.status}`);
    const { access_token: assertion } = (await exchange.json()) as { access_token: string };
    return new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion });
  }
}
