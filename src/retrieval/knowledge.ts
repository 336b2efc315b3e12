import type { Logger } from 'pino';
import type { Invalidations } from '../cache/invalidations.ts';
import type { ReadCache } from '../cache/read-cache.ts';
import type { Db } from '../db/database.ts';
import type { KnowledgeSnippet } from '../prompt/character-prompt.ts';
import type { DocumentIndex, RetrievedChunk } from './document-index.ts';
import type { Embedder } from './embeddings.ts';
import { hasReadyDocuments } from './ready-documents.ts';

/** What a reply used from a character's documents (an extra field / event on every surface). */
export interface Citation {
  documentId: string;
  chunkId: string;
  score: number;
  excerpt: string;
}

export interface Retrieved {
  snippets: KnowledgeSnippet[];
  citations: Citation[];
}

export interface KnowledgeOptions {
  /** Chunks considered per query. */
  topK: number;
  /** Approximate tokens of document text added to the prompt. */
  tokenBudget: number;
}

const EXCERPT_CHARS = 200;
const NOTHING: Retrieved = Object.freeze({ snippets: [], citations: [] }) as Retrieved;

/**
 * Retrieval for replies: the top chunks of the character's `ready` documents for the player's
 * words, within a token budget, as prompt snippets and citations. A character without ready
 * documents costs no query once that is cached (perform's hot path stays off the database).
 */
export class Knowledge {
  readonly #index: DocumentIndex;
  readonly #embedder: Embedder;
  readonly #logger: Logger;
  readonly #options: KnowledgeOptions;
  readonly #ready: ReadCache<boolean>;

  constructor(deps: {
    db: Db;
    index: DocumentIndex;
    embedder: Embedder;
    invalidations: Invalidations;
    logger: Logger;
    cacheMaxEntries: number;
    options: KnowledgeOptions;
  }) {
    this.#index = deps.index;
    this.#embedder = deps.embedder;
    this.#logger = deps.logger;
    this.#options = deps.options;
    this.#ready = deps.invalidations.cache('characterDocuments', {
      maxEntries: deps.cacheMaxEntries,
      load: (characterId) => hasReadyDocuments(deps.db, characterId),
    });
  }

  /** True when vector search is in use (pgvector and an embeddings backend). */
  get hybrid(): boolean {
    return this.#index.vectors && this.#embedder.configured;
  }

  async retrieve(projectId: string, characterId: string, query: string, signal?: AbortSignal): Promise<Retrieved> {
    const text = query.trim();
    if (!text || !(await this.#ready.get(characterId))) return NOTHING;
    let embedding: number[] | null = null;
    if (this.hybrid) {
      try {
        embedding = await this.#embedder.embedQuery(text, signal);
      } catch (err) {
        // Full-text results still ground the reply; the embeddings server's failure is logged.
        this.#logger.warn({ err }, 'query embedding failed; retrieving by full text only');
      }
    }
    const chunks = await this.#index.search({ projectId, characterId, text, embedding, limit: this.#options.topK });
    return withinBudget(chunks, this.#options.tokenBudget);
  }
}

function withinBudget(chunks: readonly RetrievedChunk[], tokenBudget: number): Retrieved {
  const result: Retrieved = { snippets: [], citations: [] };
  let used = 0;
  for (const chunk of chunks) {
    const tokens = Math.ceil(chunk.content.length / 4);
    if (used + tokens > tokenBudget && result.snippets.length > 0) break;
    used += tokens;
    const where = [chunk.headingPath.join(' > '), chunk.page === null ? '' : `page ${chunk.page}`].filter(Boolean).join(', ');
    result.snippets.push({ source: where ? `${chunk.documentId}, ${where}` : chunk.documentId, text: chunk.content });
    result.citations.push({ documentId: chunk.documentId, chunkId: chunk.chunkId, score: chunk.score, excerpt: excerpt(chunk.content) });
  }
  return result;
}

function excerpt(content: string): string {
  const flat = content.replace(/\s+/g, ' ').trim();
  return flat.length <= EXCERPT_CHARS ? flat : `${flat.slice(0, EXCERPT_CHARS - 1).trimEnd()}…`;
}
