import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';

/**
 * An in-memory `OAuthClientProvider` that needs no browser: `redirectToAuthorization` fetches the
 * authorization URL itself (a test authorization server approves at once) and keeps the code from the
 * redirect, which the test then hands to `finishAuth`. Counts how often the SDK used it.
 */
export class HeadlessOAuthProvider implements OAuthClientProvider {
  private saved: OAuthTokens | undefined;
  private verifier: string | undefined;
  private client: OAuthClientInformationMixed | undefined;
  /** Codes from authorization redirects, newest last. */
  readonly codes: string[] = [];
  readonly redirectUrl = 'http://localhost:3000/callback';
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'mcp-continuity test',
    redirect_uris: ['http://localhost:3000/callback'],
  };
  /** How many times the SDK asked for the tokens, saved tokens, redirected. */
  readonly uses = { tokens: 0, saveTokens: 0, redirects: 0 };

  /**
   * `clientId`: a pre-registered client (no registration). `clientMetadataUrl`: offered as the client id
   * where the authorization server supports client id metadata documents (CIMD).
   */
  constructor(
    clientId?: string,
    readonly clientMetadataUrl?: string,
  ) {
    if (clientId) this.client = { client_id: clientId };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.client;
  }

  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.client = info;
  }

  tokens(): OAuthTokens | undefined {
    this.uses.tokens++;
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.uses.saveTokens++;
    this.saved = tokens;
  }

  async redirectToAuthorization(url: URL): Promise<void> {
    this.uses.redirects++;
    const response = await fetch(url, { redirect: 'manual' });
    const code = new URL(response.headers.get('location') ?? '', url).searchParams.get('code');
    if (!code) throw new Error(`no code in the redirect from ${url.href}`);
    this.codes.push(code);
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    if (!this.verifier) throw new Error('no code verifier');
    return this.verifier;
  }

  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
  }
}
