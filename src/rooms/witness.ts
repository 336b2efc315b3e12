import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { StoredParticipant, TranscriptEntry } from './repository.ts';

/**
 * The room's transcript as one character witnessed it: only what was said while it was a
 * participant (it may have left and come back), others' lines as `Name: words` from the user
 * side, its own as its replies. A character never hears what was said before it came in.
 */
export function witnessedHistory(entries: readonly TranscriptEntry[], seats: readonly StoredParticipant[], characterId: string): ChatCompletionMessageParam[] {
  const mine = seats.filter((seat) => seat.characterId === characterId);
  const present = (at: string) => mine.some((seat) => seat.createdAt <= at && (seat.leftAt === null || at <= seat.leftAt));
  const history: ChatCompletionMessageParam[] = [];
  for (const entry of entries) {
    if (!present(entry.createdAt)) continue;
    if (entry.speakerType === 'agent' && entry.characterId === characterId) history.push({ role: 'assistant', content: entry.content });
    else history.push({ role: 'user', content: `${speakerOf(entry)}: ${entry.content}` });
  }
  return history;
}

/** The lines others said since the character last spoke (what its conversation records as heard). */
export function heardSinceLastLine(history: readonly ChatCompletionMessageParam[]): string {
  const lines: string[] = [];
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i];
    if (!message || message.role === 'assistant') break;
    lines.unshift(typeof message.content === 'string' ? message.content : '');
  }
  return lines.join('\n');
}

export function speakerOf(entry: Pick<TranscriptEntry, 'speakerType' | 'speakerName'>): string {
  return entry.speakerName ?? (entry.speakerType === 'user' ? 'Player' : 'Someone');
}
