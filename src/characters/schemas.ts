import { z } from 'zod';

const CapabilityIds = z
  .array(z.string().min(1).max(100))
  .max(128, 'at most 128 capabilities can be attached (the tools limit of chat completions)')
  .superRefine((ids, ctx) => {
    const seen = new Set<string>();
    ids.forEach((id, i) => {
      if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [i], message: `'${id}' is listed twice` });
      seen.add(id);
    });
  });

const Name = z.string().trim().min(1, 'must not be empty').max(200);
const Description = z.string().max(20_000).nullable();
const VoiceId = z.string().min(1).max(200).nullable();
const VoiceDescription = z.string().max(2000).nullable();

export const CreateCharacterSchema = z.strictObject({
  name: Name,
  description: Description.default(null),
  voiceId: VoiceId.default(null),
  voiceDescription: VoiceDescription.default(null),
  capabilityGroupIds: CapabilityIds.default([]),
});

export const UpdateCharacterSchema = z.strictObject({
  name: Name.optional(),
  description: Description.optional(),
  voiceId: VoiceId.optional(),
  voiceDescription: VoiceDescription.optional(),
  capabilityGroupIds: CapabilityIds.optional(),
});

export const AttachCapabilitySchema = z.strictObject({
  capabilityId: z.string().min(1).max(100),
});

export type CreateCharacterInput = z.infer<typeof CreateCharacterSchema>;
export type UpdateCharacterInput = z.infer<typeof UpdateCharacterSchema>;

export const CharacterSchema = z
  .object({
    id: z.string().meta({ example: 'character_01jf8z6r2d3m4n5p6q7r8s9t0v' }),
    createdAt: z.iso.datetime(),
    projectId: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    voiceId: z.string().nullable(),
    voiceDescription: z.string().nullable(),
    hasAvatar: z.boolean(),
    capabilityGroupIds: z.array(z.string()).describe('Attached capability ids, in the order they were attached'),
  })
  .meta({ id: 'Character' });

export type Character = z.infer<typeof CharacterSchema>;
