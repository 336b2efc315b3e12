import type { CapabilityCallEvent, ClientChannel } from '../capabilities/executor.ts';
import type { CapabilityService } from '../capabilities/service.ts';
import type { CharacterService } from '../characters/service.ts';
import type { Db } from '../db/database.ts';
import type { RecordedCapabilityCall } from '../db/schema.ts';
import { TroupeError, notFound, unavailable, toErrorEvent } from '../errors.ts';
import { newId } from '../ids.ts';
import { runCharacterTurn, type TurnDeps } from '../inference/character-turn.ts';
import type { Citation } from '../retrieval/knowledge.ts';
import { analyseConversation } from './analysis.ts';
import { toChatHistory } from './history.ts';
import type { ConversationEvent } from './events.ts';
import {
  appendMessage,
  claimConversation,
  findConversation,
  insertConversation,
  listMessages,
  publicMessage,
  recentMessages,
  storePlayerMessage,
  type Conversation,
  type Message,
} from './repository.ts';

/** Enough recent messages to fill any reasonable history budget. */
const HISTORY_FETCH_LIMIT = 500;

/** A conversation as its actor knows it: enough to answer without reading it again. */
export interface ConversationRef {
  id: string;
  projectId: string;
  characterId: string;
}

export interface ExchangeResult {
  playerMessage: Message;
  characterMessage: Message;
  /** Every capability the character called in this reply (an extra field of the HTTP reply). */
  capabilityCalls: RecordedCapabilityCall[];
  /** The document chunks the reply was given (an extra field of the HTTP reply). */
  citations: Citation[];
}

/**
 * Where a reply's events go. Surfaces with a live client (sockets, Colyseus clients) also wait
 * for client_function_call results; over HTTP those calls are returned to the caller instead.
 */
export interface ReplyOutlet {
  publish(event: ConversationEvent): void;
  awaitResult?: ClientChannel['awaitResult'];
  /** Each message as soon as it is stored (player's first, then the character's). */
  stored?(message: Message): void;
}

export interface ConversationDeps extends TurnDeps {
  db: Db;
  characters: CharacterService;
  capabilities: CapabilityService;
  historyTokens: number;
}

/**
 * Conversations: persisted history with a character. The player's message is stored before the
 * model is called and is kept whatever happens to the reply. Ordering is not this class's job:
 * each conversation's actor (`actors/conversation-room.ts`) calls `exchange` one message at a time.
 */
export class ConversationService {
  readonly #deps: ConversationDeps;

  constructor(deps: ConversationDeps) {
    this.#deps = deps;
  }

  async create(projectId: string, characterId: string): Promise<Conversation> {
    try {
      await this.#deps.characters.get(projectId, characterId);
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'not_found') {
        throw new TroupeError('invalid_reference', `No character with id '${characterId}' exists in this project.`, {
          param: 'characterId',
          detailCode: 'character_not_found',
        });
      }
      throw err;
    }
    return insertConversation(this.#deps.db, projectId, characterId);
  }

  async get(projectId: string, id: string): Promise<Conversation> {
    const conversation = await findConversation(this.#deps.db, projectId, id);
    if (!conversation) throw notFound('conversation', id);
    return conversation;
  }

  async getWithMessages(projectId: string, id: string): Promise<Conversation & { messages: Message[] }> {
    const conversation = await this.get(projectId, id);
    const messages = await listMessages(this.#deps.db, id);
    return { ...conversation, messages: messages.map(publicMessage) };
  }

  /**
   * A player's message and the character's reply, its events sent to `outlet` as they happen.
   * The caller (the conversation's actor) knows the conversation, so nothing is read to find it.
   */
  async exchange(
    conversation: ConversationRef,
    content: string,
    outlet: ReplyOutlet,
    signal: AbortSignal,
    clientKey?: string,
    /** The actor's fencing token (see `claim`); its writes are refused once superseded. */
    epoch?: number,
  ): Promise<ExchangeResult> {
    const { id: conversationId, projectId } = conversation;
    const { db } = this.#deps;
    // A failure before this is the sender's alone (its surface answers it); after it, the reply
    // has begun for every listener, so every listener is told how it ended.
    const stored = await storePlayerMessage(db, conversationId, content, clientKey, epoch);
    const playerMessage = stored.message;
    if (stored.reply) {
      // A retried call whose first attempt was fully stored: the same answer, not a second one.
      return { playerMessage: publicMessage(playerMessage), characterMessage: publicMessage(stored.reply), capabilityCalls: stored.reply.capabilityCalls, citations: [] };
    }
    if (stored.inserted) outlet.stored?.(publicMessage(playerMessage));
    const { publish } = outlet;
    // Every event of this reply names it, so a listener can tell replies apart and knows which
    // one an `error` ends.
    const replyId = newId('reply');
    try {
      const character = await this.#deps.characters.get(projectId, conversation.characterId);
      const capabilities = await this.#deps.capabilities.getMany(projectId, character.capabilityGroupIds);
      const history = toChatHistory(await recentMessages(db, conversationId, HISTORY_FETCH_LIMIT), this.#deps.historyTokens);
      const channel: ClientChannel = {
        deliver: (call: CapabilityCallEvent) =>
          publish({ type: 'capability', characterId: character.id, name: call.name, params: call.params, callId: call.callId, replyId }),
        ...(outlet.awaitResult ? { awaitResult: outlet.awaitResult } : {}),
      };
      const turn = await runCharacterTurn(this.#deps, {
        projectId,
        conversationId,
        character,
        capabilities,
        history,
        channel,
        signal,
        onText: (delta) => publish({ type: 'chunk', characterId: character.id, content: delta, done: false, replyId }),
      });
      // Stored before `done` goes out, so a client that reacts to `done` finds the reply in the history.
      const characterMessage = await appendMessage(db, conversationId, 'character', turn.text, turn.calls, epoch);
      outlet.stored?.(publicMessage(characterMessage));
      publish({ type: 'chunk', characterId: character.id, content: '', done: true, replyId });
      if (turn.citations.length > 0) publish({ type: 'citations', characterId: character.id, citations: turn.citations, replyId });
      return {
        playerMessage: publicMessage(playerMessage),
        characterMessage: publicMessage(characterMessage),
        capabilityCalls: turn.calls,
        citations: turn.citations,
      };
    } catch (err) {
      publish({ ...toErrorEvent(err, 'The character could not reply.'), replyId });
      const known = err instanceof TroupeError ? err : unavailable(err);
      throw known ? known.asReported() : new TroupeError('internal_error', 'The character could not reply.', { cause: err, reported: true });
    }
  }

  /**
   * A room character's line, kept in its own conversation (its memory of the room): what it
   * heard since it last spoke, as one player message of `Name: words` lines, then its reply.
   */
  async recordScene(conversationId: string, heard: string, reply: string): Promise<void> {
    if (heard) await appendMessage(this.#deps.db, conversationId, 'player', heard);
    await appendMessage(this.#deps.db, conversationId, 'character', reply);
  }

  /** Makes the caller the conversation's owner: the fencing token its writes must carry. */
  claim(conversationId: string): Promise<number> {
    return claimConversation(this.#deps.db, conversationId);
  }

  /** The newest messages, oldest first, as an actor rebuilds its state from them. */
  async latestMessages(conversationId: string, limit: number): Promise<Message[]> {
    return (await recentMessages(this.#deps.db, conversationId, limit)).reverse().map(publicMessage);
  }

  /**
   * Mode `analysis`: an out-of-character read of the conversation for designers, streamed to
   * `onText` only and never stored, so it does not enter the character's in-world history.
   */
  async analyse(conversation: ConversationRef, question: string, onText: (delta: string) => void, signal: AbortSignal): Promise<string> {
    const character = await this.#deps.characters.get(conversation.projectId, conversation.characterId);
    const messages = await listMessages(this.#deps.db, conversation.id);
    return analyseConversation(this.#deps.model, { character, messages, question, onText, signal });
  }
}
