import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';

/**
 * The model a character answers with, as the turn loop sees it: one streamed call at a time,
 * in the OpenAI wire format. The inference upstream implements it over HTTP; unit tests of the
 * turn loop implement it in memory.
 */
export interface CharacterModel {
  streamReply(messages: ChatCompletionMessageParam[], tools: ChatCompletionTool[], signal: AbortSignal): AsyncIterable<ChatCompletionChunk>;
}
