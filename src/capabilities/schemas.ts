import { z } from 'zod';
import { CAPABILITY_TYPES, PARAMETER_TYPES } from '../db/schema.ts';

/** OpenAI tool names: the capability name is offered to models as a function name. */
export const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export const ParameterDefinitionSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[a-zA-Z_][a-zA-Z0-9_]{0,63}$/, 'must start with a letter or _ and hold only letters, digits and _ (at most 64)'),
  type: z.enum(PARAMETER_TYPES),
  description: z.string().max(2000).nullable().default(null),
  required: z.boolean().default(false),
});

const ParametersSchema = z
  .array(ParameterDefinitionSchema)
  .max(64)
  .superRefine((params, ctx) => {
    const seen = new Set<string>();
    params.forEach((p, i) => {
      if (seen.has(p.name)) {
        ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate parameter name '${p.name}'` });
      }
      seen.add(p.name);
    });
  });

const Name = z.string().regex(FUNCTION_NAME, 'must match ^[a-zA-Z0-9_-]{1,64}$ (it is used as a tool function name)');
const Description = z.string().max(4000).nullable();
const WebhookUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  .max(2000)
  .nullable()
  .describe('Where Troupe POSTs the arguments of a server_function_* call (signed, see the README)');

export const CreateCapabilitySchema = z
  .strictObject({
    name: Name,
    description: Description.default(null),
    type: z.enum(CAPABILITY_TYPES),
    parameters: ParametersSchema,
    webhookUrl: WebhookUrl.default(null),
  })
  .superRefine((c, ctx) => {
    const message = webhookRule(c.type, c.webhookUrl);
    if (message) ctx.addIssue({ code: 'custom', path: ['webhookUrl'], message });
  });

/** Server functions are delivered to their webhook; client functions go to the game client. */
export function webhookRule(type: (typeof CAPABILITY_TYPES)[number], webhookUrl: string | null): string | null {
  const server = type === 'server_function_fire' || type === 'server_function_call';
  if (server && !webhookUrl) return `is required for ${type} capabilities: Troupe POSTs the call there`;
  if (!server && webhookUrl) return `applies only to server_function_* capabilities; ${type} calls go to the game client`;
  return null;
}

export const UpdateCapabilitySchema = z.strictObject({
  name: Name.optional(),
  description: Description.optional(),
  parameters: ParametersSchema.optional(),
  webhookUrl: WebhookUrl.optional(),
  /** `type` decides how a call is delivered, so it is fixed at creation. */
  type: z
    .never({ error: 'cannot be changed; create a new capability with the other type' })
    .optional()
    .describe('Not updatable: sending it is a 400'),
});

export type CreateCapabilityInput = z.infer<typeof CreateCapabilitySchema>;
export type UpdateCapabilityInput = z.infer<typeof UpdateCapabilitySchema>;

export const CapabilitySchema = z
  .object({
    id: z.string().meta({ example: 'capability_01jf8z6r2d3m4n5p6q7r8s9t0v' }),
    createdAt: z.iso.datetime(),
    projectId: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    type: z.enum(CAPABILITY_TYPES),
    parameters: z.array(
      z.object({
        name: z.string(),
        type: z.enum(PARAMETER_TYPES),
        description: z.string().nullable(),
        required: z.boolean(),
      }),
    ),
    webhookUrl: z.string().nullable(),
  })
  .meta({ id: 'Capability' });

export type Capability = z.infer<typeof CapabilitySchema>;
