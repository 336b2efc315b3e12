import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { StoredMessage } from './repository.ts';

/** About four characters per token, enough to keep history inside a context budget. */
const CHARS_PER_TOKEN = 4;

/**
 * The conversation as chat messages, newest kept first until the token budget is spent; the
 * newest message always stays. Calls a character made are noted in its turn, so the model
 * remembers what it did.
 */
export function toChatHistory(newestFirst: readonly StoredMessage[], tokenBudget: number): ChatCompletionMessageParam[] {
  let budget = tokenBudget * CHARS_PER_TOKEN;
  const kept: ChatCompletionMessageParam[] = [];
  for (const m of newestFirst) {
    const content = m.role === 'player' ? m.content : withCalls(m);
    if (kept.length > 0 && content.length > budget) break;
    budget -= content.length;
    kept.push(m.role === 'player' ? { role: 'user', content } : { role: 'assistant', content });
  }
  return kept.reverse();
}

function withCalls(m: StoredMessage): string {
  if (m.capabilityCalls.length === 0) return m.content;
  const calls = m.capabilityCalls.map((c) => `${c.name}(${JSON.stringify(c.params)})`).join(', ');
  return `${m.content}${m.content ? ' ' : ''}[called ${calls}]`;
}
