import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ContinuityClientTransport } from '../../src/index.js';

/**
 * The client the MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16) runs for its client
 * scenarios: `conformance client --command "<this app>" --scenario <name>` starts the scenario's server and
 * runs this with the server URL as the last argument and the scenario's name in `MCP_CONFORMANCE_SCENARIO`.
 * The SDK's `Client` over `ContinuityClientTransport`; `CONFORMANCE_CLIENT_TRANSPORT=sdk` runs the SDK's
 * own `StreamableHTTPClientTransport` instead, for comparison. Exits 0 when the scenario's steps completed.
 *
 * Scenarios are a table (`SCENARIOS`): one for auth can be added next to these.
 */

export type ScenarioSteps = (client: Client) => Promise<void>;

/** What a scenario needs of the client besides its steps. */
interface ClientScenario {
  readonly steps: ScenarioSteps;
  readonly setup?: (client: Client) => void;
  readonly capabilities?: ConstructorParameters<typeof Client>[1];
}

const listTools: ScenarioSteps = async (client) => {
  await client.listTools();
};

const callTool =
  (name: string, args: Record<string, unknown> = {}): ScenarioSteps =>
  async (client) => {
    await client.listTools();
    const result = await client.callTool({ name, arguments: args });
    if (result.isError) throw new Error(`${name} answered an error: ${JSON.stringify(result.content)}`);
  };

const SCENARIOS: Record<string, ClientScenario> = {
  initialize: { steps: listTools },
  tools_call: { steps: callTool('add_numbers', { a: 5, b: 3 }) },
  // The server asks for fields it gives defaults for; the SDK Client fills the omitted ones in (SEP-1034).
  'elicitation-sep1034-client-defaults': {
    capabilities: { capabilities: { elicitation: { form: { applyDefaults: true } } } },
    setup: (client) =>
      client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} })),
    steps: callTool('test_client_elicitation_defaults'),
  },
  // The tool's POST stream is closed after a priming event with `retry: 500`; the answer comes on the resume.
  'sse-retry': { steps: callTool('test_reconnection') },
};

function transportFor(url: URL): Transport {
  return process.env.CONFORMANCE_CLIENT_TRANSPORT === 'sdk'
    ? new StreamableHTTPClientTransport(url)
    : new ContinuityClientTransport(url);
}

async function main(): Promise<void> {
  const url = process.argv[process.argv.length - 1];
  const name = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
  const scenario = SCENARIOS[name];
  if (!url || !scenario) throw new Error(`usage: MCP_CONFORMANCE_SCENARIO=<${Object.keys(SCENARIOS)}> <url>`);
  const client = new Client({ name: 'mcp-continuity-conformance', version: '1.0.0' }, scenario.capabilities);
  scenario.setup?.(client);
  await client.connect(transportFor(new URL(url)));
  await scenario.steps(client);
  await client.close();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
