import { z } from 'zod';
import { defineRoute } from '../route.ts';

const ActionSchema = z.union([
  z.object({ type: z.literal('text'), content: z.string() }),
  z.object({ type: z.literal('function'), name: z.string(), input: z.record(z.string(), z.unknown()) }),
]);

/**
 * NPC decisions for game loops: `npcId` is a character id of the caller's project. Text actions
 * have type `text` (clients must also accept `npc.text`, which the interface's example uses).
 */
export const performRoutes = [
  defineRoute({
    method: 'POST',
    path: '/perform',
    auth: 'key',
    tags: ['Perform'],
    summary: "An NPC's next actions: what it says, and calls of its client capabilities",
    body: z.strictObject({
      npcId: z.string().min(1).max(200).describe('A character id'),
      history: z
        .array(z.strictObject({ role: z.enum(['player', 'npc']), content: z.string().max(32_000) }))
        .max(500)
        .default([]),
    }),
    response: { status: 200, schema: z.array(ActionSchema), description: 'Actions in the order the NPC took them' },
    errors: [404, 502],
    handler: async ({ body, principal, resources, signal }) => ({
      body: await resources.perform.perform(principal.projectId, body.npcId, body.history, signal),
    }),
  }),
];
