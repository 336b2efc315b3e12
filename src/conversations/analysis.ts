import type { Character } from '../characters/schemas.ts';
import type { CharacterModel } from '../inference/character-model.ts';
import type { StoredMessage } from './repository.ts';

/** Transcripts longer than this are cut from the start for analysis. */
const MAX_TRANSCRIPT_CHARS = 48_000;

/**
 * A designer's question about a conversation, answered out of character: the model sees the
 * character's definition and the transcript as material, not as a role to play.
 */
export async function analyseConversation(
  model: CharacterModel,
  input: { character: Character; messages: StoredMessage[]; question: string; onText: (delta: string) => void; signal: AbortSignal },
): Promise<string> {
  const { character, messages, question } = input;
  let transcript = messages.map((m) => `${m.role === 'player' ? 'Player' : character.name}: ${m.content}`).join('\n');
  if (transcript.length > MAX_TRANSCRIPT_CHARS) transcript = transcript.slice(-MAX_TRANSCRIPT_CHARS);
  const system =
    'You are a narrative designer reviewing a conversation between a player and a game character. ' +
    'Answer out of character, plainly and concisely: consistency with the character, what the player seems to want, ' +
    'and anything the designer should change.\n\n' +
    `Character: ${character.name}\n${character.description ?? '(no description)'}\n\nTranscript:\n${transcript || '(no messages yet)'}`;
  const prompt = [{ role: 'system' as const, content: system }, { role: 'user' as const, content: question }];
  let text = '';
  for await (const chunk of model.streamReply(prompt, [], input.signal)) {
    const delta = chunk.choices?.[0]?.delta?.content;
    if (delta) {
      text += delta;
      input.onText(delta);
    }
  }
  return text;
}
