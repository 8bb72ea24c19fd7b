import http from 'node:http';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { type ContinuityServer, createContinuityServer } from '../../src/index.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * The application the MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16) tests against:
 * `createContinuityServer` with a v1 `McpServer` per session, registering the tools, resources and prompts
 * its server scenarios name (`conformance list`), each behaving as the scenario's description asks.
 */

/** A 1×1 PNG. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

/** A valid WAV file: 8 kHz, 8-bit mono, 8 samples of silence. */
function wav(): string {
  const samples = 8;
  const b = Buffer.alloc(44 + samples, 0x80);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + samples, 4);
  b.write('WAVE', 8);
  b.write('fmt ', 12);
  b.writeUInt32LE(16, 16); // fmt chunk size
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(8_000, 24); // sample rate
  b.writeUInt32LE(8_000, 28); // byte rate
  b.writeUInt16LE(1, 32); // block align
  b.writeUInt16LE(8, 34); // bits per sample
  b.write('data', 36);
  b.writeUInt32LE(samples, 40);
  return b.toString('base64');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
const JSON_SCHEMA_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

function registerTools(server: McpServer): void {
  server.registerTool('test_simple_text', { description: 'Returns simple text' }, async () =>
    text('This is a simple text response for testing.'),
  );
  server.registerTool('test_image_content', { description: 'Returns an image' }, async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'Returns audio' }, async () => ({
    content: [{ type: 'audio', data: wav(), mimeType: 'audio/wav' }],
  }));
  server.registerTool(
    'test_embedded_resource',
    { description: 'Returns an embedded resource' },
    async () => ({
      content: [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    }),
  );
  server.registerTool(
    'test_multiple_content_types',
    { description: 'Returns text, image and resource' },
    async () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  );
  server.registerTool('test_tool_with_logging', { description: 'Logs three messages' }, async (extra) => {
    const log = (data: string) =>
      extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
    await log('Tool execution started');
    await sleep(50);
    await log('Tool processing data');
    await sleep(50);
    await log('Tool execution completed');
    return text('Logging tool completed');
  });
  server.registerTool('test_tool_with_progress', { description: 'Reports progress' }, async (extra) => {
    const token = extra._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await sleep(50);
      if (token !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total: 100 },
        });
      }
    }
    return text('Progress tool completed');
  });
  server.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool(
    'test_sampling',
    { description: 'Asks the client for a completion', inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      // Sent on the call's own stream (related to the request), not the standalone one.
      const result = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 },
        },
        CreateMessageResultSchema,
        { timeout: 10_000 },
      );
      const content = result.content;
      const answer =
        !Array.isArray(content) && content.type === 'text' ? content.text : JSON.stringify(content);
      return text(`LLM response: ${answer}`);
    },
  );
  server.registerTool(
    'test_elicitation',
    { description: 'Asks the user for input', inputSchema: { message: z.string() } },
    async ({ message }, extra) => {
      const result = await extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message,
            requestedSchema: {
              type: 'object',
              properties: {
                username: { type: 'string', description: "User's response" },
                email: { type: 'string', description: "User's email address" },
              },
              required: ['username', 'email'],
            },
          },
        },
        ElicitResultSchema,
        { timeout: 10_000 },
      );
      return text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
    },
  );
  server.registerTool(
    'test_elicitation_sep1034_defaults',
    { description: 'Elicitation with a default for every primitive type' },
    async (extra) => {
      const result = await extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message: 'Please review these defaults',
            requestedSchema: {
              type: 'object',
              properties: {
                name: { type: 'string', default: 'John Doe' },
                age: { type: 'integer', default: 30 },
                score: { type: 'number', default: 95.5 },
                status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
                verified: { type: 'boolean', default: true },
              },
            },
          },
        },
        ElicitResultSchema,
        { timeout: 10_000 },
      );
      return text(
        `Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`,
      );
    },
  );
  server.registerTool(
    'test_elicitation_sep1330_enums',
    { description: 'Elicitation with the five enum forms' },
    async (extra) => {
      const result = await extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message: 'Please choose',
            requestedSchema: {
              type: 'object',
              properties: {
                untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
                titledSingle: {
                  type: 'string',
                  oneOf: [
                    { const: 'value1', title: 'First Option' },
                    { const: 'value2', title: 'Second Option' },
                    { const: 'value3', title: 'Third Option' },
                  ],
                },
                legacyEnum: {
                  type: 'string',
                  enum: ['opt1', 'opt2', 'opt3'],
                  enumNames: ['Option One', 'Option Two', 'Option Three'],
                },
                untitledMulti: {
                  type: 'array',
                  items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
                },
                titledMulti: {
                  type: 'array',
                  items: {
                    anyOf: [
                      { const: 'value1', title: 'First Choice' },
                      { const: 'value2', title: 'Second Choice' },
                      { const: 'value3', title: 'Third Choice' },
                    ],
                  },
                },
              },
            },
          },
        },
        ElicitResultSchema,
        { timeout: 10_000 },
      );
      return text(
        `Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`,
      );
    },
  );
  // JSON Schema 2020-12 keywords kept in the listing (SEP-1613). The SDK renders zod as draft-7
  // (`definitions`), so the 2020-12 `$schema` and `$defs` are stated in the schema's metadata, which
  // the rendering copies as is; the validation zod does is the same schema.
  const address = { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } };
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: z
        .strictObject({
          name: z.string().optional(),
          address: z
            .object({ street: z.string().optional(), city: z.string().optional() })
            .optional()
            .meta({ $ref: '#/$defs/address' }),
        })
        .meta({ $schema: JSON_SCHEMA_2020_12, $defs: { address } }),
    },
    async (args) => text(`received ${JSON.stringify(args)}`),
  );
  // SSE polling (SEP-1699): the scenario expects the tool to close its stream mid-call; this server has
  // no way for a tool to do that (its streams close only when the connection does), so it just answers
  // after a pause and the scenario reports that as informational.
  server.registerTool('test_reconnection', { description: 'Answers after a pause' }, async () => {
    await sleep(100);
    return text('Reconnection test completed');
  });
}

function registerResources(server: McpServer): void {
  server.registerResource(
    'static-text',
    'test://static-text',
    { description: 'A static text resource', mimeType: 'text/plain' },
    async (uri) => ({
      contents: [
        { uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
      ],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { description: 'A static binary resource', mimeType: 'image/png' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { description: 'A resource clients may subscribe to', mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'watched' }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A resource template', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    }),
  );
  // Subscriptions are tracked per session; this app never changes a resource, so none is ever notified.
  const subscribed = new Set<string>();
  server.server.setRequestHandler(SubscribeRequestSchema, async ({ params }) => {
    subscribed.add(params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async ({ params }) => {
    subscribed.delete(params.uri);
    return {};
  });
}

function registerPrompts(server: McpServer): void {
  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, async () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments',
      argsSchema: {
        arg1: completable(z.string().describe('First test argument'), (value) =>
          ['paris', 'park', 'party', 'test'].filter((v) => v.startsWith(value)),
        ),
        arg2: z.string().describe('Second test argument'),
      },
    },
    async ({ arg1, arg2 }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
        },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt embedding a resource', argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));
}

/** One session's `McpServer`, with everything the conformance scenarios call. */
export function conformanceMcpServer(): McpServer {
  const server = new McpServer(
    { name: 'mcp-continuity-conformance', version: '1.0.0' },
    { capabilities: { logging: {}, resources: { subscribe: true } } },
  );
  registerTools(server);
  registerResources(server);
  registerPrompts(server);
  return server;
}

export interface ConformanceApp {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly continuity: ContinuityServer;
  close(): Promise<void>;
}

/** Starts the app on 127.0.0.1, ephemeral port, with the library's default settings. */
export async function startConformanceApp(): Promise<ConformanceApp> {
  const continuity = createContinuityServer({
    createMcpServer: () => conformanceMcpServer(),
    onError: () => undefined,
  });
  const server = http.createServer(continuity.nodeHandler);
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    continuity,
    async close() {
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
