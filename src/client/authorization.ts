import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import {
  type AuthChallenge,
  type AuthorizationResult,
  authorizationResultOf,
} from '../../machines/client/authorization.js';
import type { FetchLike } from './exchange.js';

type SdkAuth = typeof import('@modelcontextprotocol/sdk/client/auth.js');

/**
 * The SDK's OAuth client, loaded when a transport is given an `authProvider` (an application without
 * OAuth never loads it). The SDK is a required peer of the transport already.
 */
const sdkAuth = (): Promise<SdkAuth> => import('@modelcontextprotocol/sdk/client/auth.js');

/**
 * Runs the application's `OAuthClientProvider` for a transport, with the SDK's own `auth()` (protected
 * resource metadata, authorization-server discovery, registration, PKCE, refresh, scope step-up): nothing
 * of OAuth is written here. The stream machine decides when to authorize and what a result means
 * (machines/client/authorization.ts); this class does the I/O and keeps what the SDK transport keeps
 * between calls (the last challenge's resource metadata URL and scope). Tokens stay in the provider: they
 * are read for each request and never written anywhere else (not to the cursor store).
 */
export class ProviderAuthorization {
  private resourceMetadataUrl: URL | undefined;
  private scope: string | undefined;
  /** The authorization running now: streams refused at once share it (one refresh, one redirect). */
  private running: Promise<AuthorizationResult> | undefined;
  private readonly waiting = new Set<() => void>();
  /** The application was told (once) that authorization needs it, since the last `finishAuth`. */
  private toldApplication = false;

  constructor(
    private readonly url: URL,
    readonly provider: OAuthClientProvider,
    private readonly fetchFn: FetchLike,
    private readonly onerror: (error: Error) => void,
  ) {}

  /** The `Authorization` header value for the provider's current token, if it has one. */
  async header(): Promise<string | undefined> {
    const tokens = await this.provider.tokens();
    return tokens?.access_token ? `Bearer ${tokens.access_token}` : undefined;
  }

  /** The stream machine's `authorize` actor: the SDK's `auth()` for this challenge. */
  authorize(challenge: AuthChallenge): Promise<AuthorizationResult> {
    this.running ??= this.run(challenge).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async run(challenge: AuthChallenge): Promise<AuthorizationResult> {
    const { auth, extractWWWAuthenticateParams } = await sdkAuth();
    const headers = new Headers();
    if (challenge.wwwAuthenticate) headers.set('WWW-Authenticate', challenge.wwwAuthenticate);
    const params = extractWWWAuthenticateParams(new Response(null, { status: challenge.status, headers }));
    this.resourceMetadataUrl = params.resourceMetadataUrl ?? this.resourceMetadataUrl;
    this.scope = params.scope ?? this.scope;
    try {
      const result = await auth(this.provider, {
        serverUrl: this.url,
        resourceMetadataUrl: this.resourceMetadataUrl,
        scope: this.scope,
        fetchFn: this.fetchFn,
      });
      return authorizationResultOf(result);
    } catch (error) {
      this.onerror(error instanceof Error ? error : new Error(String(error)));
      return authorizationResultOf('threw');
    }
  }

  /**
   * The stream machine's `awaitAuthorization` actor: tells the application (once) with the SDK's
   * `UnauthorizedError`, and calls `granted` after the next successful `finishAuth`.
   */
  waitForGrant(granted: () => void): () => void {
    this.waiting.add(granted);
    if (!this.toldApplication) {
      this.toldApplication = true;
      void this.unauthorizedError(
        'Authorization needed: call finishAuth(code), then the transport goes on',
      ).then((error) => this.onerror(error));
    }
    return () => this.waiting.delete(granted);
  }

  /**
   * The application's half of the authorization code flow, as the SDK transport's `finishAuth`: trades the
   * code for tokens, then every stream waiting for authorization goes on.
   */
  async finishAuth(authorizationCode: string): Promise<void> {
    const { auth, UnauthorizedError } = await sdkAuth();
    const result = await auth(this.provider, {
      serverUrl: this.url,
      authorizationCode,
      resourceMetadataUrl: this.resourceMetadataUrl,
      scope: this.scope,
      fetchFn: this.fetchFn,
    });
    if (result !== 'AUTHORIZED') throw new UnauthorizedError('Failed to authorize');
    this.toldApplication = false;
    const waiting = [...this.waiting];
    this.waiting.clear();
    for (const granted of waiting) granted();
  }

  async unauthorizedError(message?: string): Promise<Error> {
    const { UnauthorizedError } = await sdkAuth();
    return new UnauthorizedError(message);
  }
}
