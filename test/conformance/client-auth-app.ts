/**
 * The client the conformance suite's `auth/*` scenarios run (client-auth.test.ts): an application written
 * for the SDK's `StreamableHTTPClientTransport` with an `authProvider`, whose transport class is the only
 * thing that changes (`MCPC_AUTH_TRANSPORT`: `sdk` or `continuity`). It connects, lists tools and calls
 * `test-tool`; when a step fails with the SDK's `UnauthorizedError` and the provider was sent to the
 * authorization page, it hands the code to `finishAuth` and tries again, as the SDK documents: a failed
 * `connect` closed its transport, so it connects a new one; a failed call is sent again on the same one.
 * The provider approves headlessly (it fetches the authorization URL and keeps the code from the redirect).
 *
 * Writes what the provider was asked to do to `MCPC_AUTH_REPORT` (JSON), so the test counts a scenario only
 * where the provider really obtained a token.
 */
import { writeFileSync } from 'node:fs';
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import {
  ClientCredentialsProvider,
  PrivateKeyJwtProvider,
} from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ContinuityClientTransport } from '../../src/index.js';
import { HeadlessOAuthProvider } from '../support/oauth-provider.js';
import { CrossAppAccessProvider, type CrossAppContext } from './cross-app-provider.js';

/** The client id metadata document URL the CIMD scenario expects a client to offer. */
const CIMD_URL = 'https://conformance-test.local/client-metadata.json';
/** `finishAuth` rounds per step: one authorization, one scope step-up, and one more. */
const MAX_ROUNDS = 3;

type AuthTransport = Transport & { finishAuth(code: string): Promise<void>; close(): Promise<void> };

interface Context {
  readonly client_id?: string;
  readonly client_secret?: string;
  readonly private_key_pem?: string;
  readonly signing_algorithm?: string;
}

const serverUrl = new URL(process.argv[2] as string);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as Context;
const kind = process.env.MCPC_AUTH_TRANSPORT === 'sdk' ? 'sdk' : 'continuity';
const uses: Record<string, number> = {};

function providerFor(): { provider: OAuthClientProvider; headless?: HeadlessOAuthProvider } {
  if (scenario === 'auth/client-credentials-basic')
    return {
      provider: new ClientCredentialsProvider({
        clientId: context.client_id as string,
        clientSecret: context.client_secret as string,
      }),
    };
  if (scenario === 'auth/client-credentials-jwt')
    return {
      provider: new PrivateKeyJwtProvider({
        clientId: context.client_id as string,
        privateKey: context.private_key_pem as string,
        algorithm: context.signing_algorithm ?? 'ES256',
      }),
    };
  if (scenario === 'auth/cross-app-access-complete-flow')
    return { provider: new CrossAppAccessProvider(serverUrl, context as unknown as CrossAppContext) };
  const headless = new HeadlessOAuthProvider(undefined, CIMD_URL);
  if (scenario === 'auth/pre-registration')
    headless.saveClientInformation({
      client_id: context.client_id as string,
      client_secret: context.client_secret,
      redirect_uris: [headless.redirectUrl],
    });
  return { provider: headless, headless };
}

/** Counts every call the SDK (or our transport) makes on the provider. */
function counted(provider: OAuthClientProvider): OAuthClientProvider {
  return new Proxy(provider, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        uses[String(key)] = (uses[String(key)] ?? 0) + 1;
        return value.apply(target, args);
      };
    },
  });
}

const { provider: raw, headless } = providerFor();
const provider = counted(raw);

function transport(): AuthTransport {
  return kind === 'sdk'
    ? new StreamableHTTPClientTransport(serverUrl, { authProvider: provider })
    : new ContinuityClientTransport(serverUrl, { authProvider: provider });
}

/** The code of an authorization the provider was redirected to, not yet handed to `finishAuth`. */
function pendingCode(): string | undefined {
  return headless?.codes.shift();
}

async function main(): Promise<void> {
  let client: Client | undefined;
  let current: AuthTransport | undefined;
  for (let round = 0; round < MAX_ROUNDS && !client; round++) {
    const t = transport();
    const c = new Client({ name: 'mcp-continuity-auth-client', version: '1.0.0' }, { capabilities: {} });
    try {
      await c.connect(t);
      client = c;
      current = t;
    } catch (error) {
      const code = pendingCode();
      if (!(error instanceof UnauthorizedError) || code === undefined) throw error;
      await t.finishAuth(code);
    }
  }
  if (!client || !current) throw new Error('could not connect');
  const authorized = async <T>(step: () => Promise<T>): Promise<T> => {
    for (let round = 1; ; round++) {
      try {
        return await step();
      } catch (error) {
        const code = pendingCode();
        if (!(error instanceof UnauthorizedError) || code === undefined || round >= MAX_ROUNDS) throw error;
        await current.finishAuth(code);
      }
    }
  };
  const c = client;
  await authorized(() => c.listTools());
  await authorized(() => c.callTool({ name: 'test-tool', arguments: {} }));
  await current.close();
}

try {
  await main();
} finally {
  if (process.env.MCPC_AUTH_REPORT)
    writeFileSync(process.env.MCPC_AUTH_REPORT, JSON.stringify({ kind, uses }));
}
