import { describe, expect, it } from 'vitest';
import { encode, MissingFunctionError, REDACTED, revive } from '../../src/trace/codec.js';

describe('trace codec', () => {
  it('keeps Sets and Maps through JSON', () => {
    const value = { seen: new Set(['a', 'b']), streams: new Map([[1, { open: true }]]), n: 3 };
    const back = revive(JSON.parse(JSON.stringify(encode(value, { redact: false })))) as typeof value;
    expect(back.seen).toEqual(new Set(['a', 'b']));
    expect(back.streams).toEqual(new Map([[1, { open: true }]]));
    expect(back.n).toBe(3);
  });

  it('redacts credentials and payloads by default, keeps what the machines decide on', () => {
    const event = {
      type: 'sse.event',
      id: '1-2-3',
      data: '{"jsonrpc":"2.0","id":1,"result":{"card":"4242"}}',
      headers: { Authorization: 'Bearer secret', Cookie: 's=1', 'content-type': 'text/event-stream' },
      message: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'card 4242' }] } },
      request: { method: 'tools/call', params: { name: 'charge', arguments: { card: '4242' } } },
      error: { code: -32050, data: { reason: 'session_lost' } },
    };
    const out = encode(event) as typeof event;
    expect(JSON.stringify(out)).not.toMatch(/secret|4242|s=1/);
    expect(out.headers.Authorization).toBe(REDACTED);
    expect(out.headers['content-type']).toBe('text/event-stream');
    expect(out.message.result).toBe(REDACTED);
    expect('result' in out.message).toBe(true); // still a response
    expect(out.request.params.name).toBe('charge');
    expect(out.request.params.arguments).toBe(REDACTED);
    expect(out.error).toEqual({ code: -32050, data: { reason: 'session_lost' } });
    expect(out.id).toBe('1-2-3');
    expect(JSON.stringify(encode(event, { redact: false }))).toContain('Bearer secret');
  });

  it("revives a named function from the reader's table, and one it lacks as a thrower", () => {
    function policy() {
      return true;
    }
    const encoded = JSON.parse(JSON.stringify(encode({ policy, own: () => 1 })));
    const back = revive(encoded, new Map([['policy', policy]])) as {
      policy: () => boolean;
      own: () => number;
    };
    expect(back.policy).toBe(policy);
    expect(() => back.own()).toThrow(MissingFunctionError);
  });
});

describe('traces from before a machine was renamed', () => {
  it('the 2026-07-28 call machine is found by its former root id (statelessCall) as well as today’s', async () => {
    const { catalogById } = await import('../../src/trace/replay.js');
    const { modernCallMachine } = await import('../../machines/client/modern-call.machine.js');
    const byId = catalogById();
    expect(byId.get('modernCall')).toBe(modernCallMachine);
    expect(byId.get('statelessCall')).toBe(modernCallMachine);
  });
});
