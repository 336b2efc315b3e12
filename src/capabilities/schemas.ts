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

export const CreateCapabilitySchema = z.strictObject({
  name: Name,
  description: Description.default(null),
  type: z.enum(CAPABILITY_TYPES),
  parameters: ParametersSchema,
});

export const UpdateCapabilitySchema = z.strictObject({
  name: Name.optional(),
  description: Description.optional(),
  parameters: ParametersSchema.optional(),
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
  })
  .meta({ id: 'Capability' });

export type Capability = z.infer<typeof CapabilitySchema>;
