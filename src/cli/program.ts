import type { ProgramSpec } from './args.js';

/** The commands of `mcp-continuity` and their options (parsed by ./args.ts, run by ./main.ts). */
export const PROGRAM: ProgramSpec = {
  name: 'mcp-continuity',
  description: 'MCP Streamable HTTP that never confuses a dropped connection with a lost session',
  commands: {
    demo: {
      description:
        'run the design note scenario: a long charge through a balancer that cuts idle connections, then a chatty tool through a too-small buffer, then the charge again on MCP 2026-07-28',
      options: {
        'idle-timeout': {
          kind: 'int',
          placeholder: '<ms>',
          description: "the balancer's idle timeout",
          default: 250,
        },
        'charge-ms': {
          kind: 'int',
          placeholder: '<ms>',
          description: 'how long the charge takes',
          default: 1_500,
        },
        count: {
          kind: 'int',
          placeholder: '<n>',
          description: 'notifications the chatty tool sends',
          default: 300,
        },
        buffer: {
          kind: 'int',
          placeholder: '<n>',
          description: 'events the server keeps per stream',
          default: 100,
        },
        'no-inspect': { kind: 'flag', description: 'do not serve the inspector page' },
        'inspect-port': {
          kind: 'int',
          placeholder: '<n>',
          description: 'port of the inspector page; 0: any free port',
          default: 0,
        },
        'wait-for-page': {
          kind: 'flag',
          description: 'start the scenario once an inspector page is open (waits at most 60 s)',
        },
        slow: {
          kind: 'flag',
          description: 'wait for the inspector page, and pause 2 s before each part, to watch it live',
        },
        hold: {
          kind: 'flag',
          description: 'keep the inspector page serving after the demo ends, until Ctrl-C',
        },
      },
    },
    explain: {
      description:
        'tell how each call and stream of a trace ended, and why (a trace: createTrace, docs/operations.md)',
      arguments: [{ name: 'trace', description: 'the trace file (its rotated parts are read too)' }],
      options: {},
    },
    replay: {
      description:
        "run a trace's recorded events through today's machines and flag any decision that now differs (exit 1)",
      arguments: [{ name: 'trace', description: 'the trace file (its rotated parts are read too)' }],
      options: {
        open: {
          kind: 'flag',
          description:
            "then serve the inspector page over the trace, with a time scrubber (today's machines as of each instant), until Ctrl-C",
        },
        port: {
          kind: 'int',
          placeholder: '<n>',
          description: 'port of the page (with --open); 0: any free port',
          default: 0,
        },
      },
    },
    probe: {
      description:
        "a report card of an MCP server's continuity on 2025-11-25 and 2026-07-28, from the outside: calls no tool unless you name one",
      arguments: [{ name: 'url', description: 'the MCP endpoint (http:// or https://)' }],
      options: {
        header: {
          kind: 'repeat',
          placeholder: "'<name>: <value>'",
          description: 'sent on every request (authorization, for one)',
        },
        tool: {
          kind: 'string',
          placeholder: '<name>',
          description: 'a tool the probe may call (with --read-only: twice, and cut)',
        },
        args: {
          kind: 'string',
          placeholder: '<json>',
          description: "the tool's arguments, a JSON object",
          default: '{}',
        },
        'read-only': {
          kind: 'flag',
          description: 'the tool named changes nothing: calling it twice is harmless',
        },
        json: { kind: 'flag', description: 'print the report as JSON' },
        timeout: {
          kind: 'int',
          placeholder: '<ms>',
          description: 'bound of every request',
          default: 10_000,
        },
        'max-bytes': {
          kind: 'int',
          placeholder: '<n>',
          description: 'bound of every answer body',
          default: 1_048_576,
        },
        'stream-wait': {
          kind: 'int',
          placeholder: '<ms>',
          description: 'how long a stream is kept open for its first event',
          default: 1_000,
        },
        'cut-after': {
          kind: 'int',
          placeholder: '<ms>',
          description: "when the named call's stream is cut",
          default: 200,
        },
        'evict-wait': {
          kind: 'int',
          placeholder: '<ms>',
          description:
            'wait this long before sending a cursor as evicted (default: the advertised retention and a margin)',
        },
        'max-wait': {
          kind: 'int',
          placeholder: '<ms>',
          description: 'the longest the probe waits for an eviction',
          default: 30_000,
        },
      },
    },
    inspect: {
      description:
        'serve the live inspector page: the statecharts, cursors, gaps, outcome-unknown calls and metrics of running clients and servers',
      options: {
        port: { kind: 'int', placeholder: '<n>', description: 'port to listen on', default: 4477 },
        host: {
          kind: 'string',
          placeholder: '<host>',
          description: 'address to bind (loopback keeps it to this machine)',
          default: '127.0.0.1',
        },
      },
    },
  },
};
