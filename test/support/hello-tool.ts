import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * Registers `hello`: a tool that asks the client's user for a name (`inputRequests.name`, an elicitation
 * form), then greets it. The tasks tests run it as a task to exercise an input round; `onAsked` is told
 * each time the question is put.
 */
export function registerHello(server: McpServer, onAsked: () => void = () => undefined): void {
  server.registerTool('hello', { inputSchema: z.object({}) }, async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.name as
      | { action?: string; content?: { name?: string } }
      | undefined;
    if (!answer) {
      onAsked();
      return {
        resultType: 'input_required' as const,
        inputRequests: {
          name: {
            method: 'elicitation/create',
            params: {
              mode: 'form',
              message: 'Your name?',
              requestedSchema: {
                type: 'object',
                properties: { name: { type: 'string' } },
                required: ['name'],
              },
            },
          },
        },
      };
    }
    return { content: [{ type: 'text', text: `Hello, ${answer.content?.name}!` }] };
  });
}
