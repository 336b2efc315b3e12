import { sql } from 'drizzle-orm';
import { boolean, customType, index, integer, jsonb, pgTable, primaryKey, smallint, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

// The rooms' tables are in room-schema.ts; the two modules together are the database's schema.

export const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();

export const projects = pgTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  /** Signs outgoing capability webhooks (HMAC-SHA256); 64 hex characters of randomness. */
  webhookSecret: text('webhook_secret')
    .notNull()
    .default(sql`replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')`),
  createdAt: createdAt(),
});

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name'),
    /** SHA-256 of the whole key; the secret itself is never stored. */
    keyHash: text('key_hash').notNull(),
    /** First characters of the key, shown in listings so people can tell keys apart. */
    keyPrefix: text('key_prefix').notNull(),
    createdAt: createdAt(),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [uniqueIndex('api_keys_key_hash_idx').on(t.keyHash), index('api_keys_project_idx').on(t.projectId, t.id)],
);

export const characters = pgTable(
  'characters',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    voiceId: text('voice_id'),
    voiceDescription: text('voice_description'),
    hasAvatar: boolean('has_avatar').notNull().default(false),
    createdAt: createdAt(),
  },
  (t) => [index('characters_project_idx').on(t.projectId, t.id)],
);

export const CAPABILITY_TYPES = [
  'client_function_fire',
  'client_function_call',
  'server_function_fire',
  'server_function_call',
] as const;
export type CapabilityType = (typeof CAPABILITY_TYPES)[number];

export const PARAMETER_TYPES = ['string', 'number', 'boolean', 'integer'] as const;
export type ParameterType = (typeof PARAMETER_TYPES)[number];

export interface ParameterDefinition {
  name: string;
  type: ParameterType;
  description: string | null;
  required: boolean;
}

export const capabilities = pgTable(
  'capabilities',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    type: text('type', { enum: CAPABILITY_TYPES }).notNull(),
    parameters: jsonb('parameters').$type<ParameterDefinition[]>().notNull().default(sql`'[]'::jsonb`),
    /** Where server_function_* capabilities are delivered. */
    webhookUrl: text('webhook_url'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('capabilities_project_name_idx').on(t.projectId, t.name), index('capabilities_project_idx').on(t.projectId, t.id)],
);

/** Which capabilities a character may call; `position` keeps the order they were attached in. */
export const characterCapabilities = pgTable(
  'character_capabilities',
  {
    characterId: text('character_id')
      .notNull()
      .references(() => characters.id, { onDelete: 'cascade' }),
    capabilityId: text('capability_id')
      .notNull()
      .references(() => capabilities.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
  },
  (t) => [primaryKey({ columns: [t.characterId, t.capabilityId] }), index('character_capabilities_capability_idx').on(t.capabilityId)],
);

export const conversations = pgTable(
  'conversations',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    characterId: text('character_id')
      .notNull()
      .references(() => characters.id, { onDelete: 'cascade' }),
    /**
     * Fencing token of the conversation's actor: each new actor takes the next number, and a
     * message is stored only under the current one, so an actor that was superseded (its
     * process cut off from Redis while another took over) can never write again.
     */
    ownerEpoch: integer('owner_epoch').notNull().default(0),
    createdAt: createdAt(),
  },
  (t) => [index('conversations_project_idx').on(t.projectId, t.id), index('conversations_character_idx').on(t.characterId)],
);

const MESSAGE_ROLES = ['player', 'character'] as const;
export type MessageRole = (typeof MESSAGE_ROLES)[number];

/** A capability the character called while producing a message. */
export interface RecordedCapabilityCall {
  callId: string;
  name: string;
  type: CapabilityType;
  params: Record<string, unknown>;
  /** What the call returned to the character, when it returns something. */
  result?: unknown;
}

export const messages = pgTable(
  'messages',
  {
    id: text('id').primaryKey(),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    /** Position in the conversation: the order messages were accepted in. */
    seq: integer('seq').notNull(),
    role: text('role', { enum: MESSAGE_ROLES }).notNull(),
    content: text('content').notNull(),
    capabilityCalls: jsonb('capability_calls').$type<RecordedCapabilityCall[]>().notNull().default(sql`'[]'::jsonb`),
    /**
     * The caller's key for a player's message: a call retried after its actor's process died
     * finds the message stored instead of storing it twice.
     */
    clientKey: text('client_key'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('messages_conversation_seq_idx').on(t.conversationId, t.seq),
    uniqueIndex('messages_conversation_client_key_idx').on(t.conversationId, t.clientKey),
  ],
);

/** The original bytes of an upload; postgres.js returns a Buffer, PGlite a Uint8Array. */
const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({ dataType: () => 'bytea' });

/** A fixed-length bit string: the chunks of one block holding a word (see `documentTerms`). */
const blockBits = customType<{ data: string }>({ dataType: () => 'bit(1024)' });

/**
 * Text compared byte by byte (collation "C"), whatever the database's: a word is only ever
 * looked up by equality, and a libc collation (C.UTF-8 included) sorts and compares through
 * strcoll, without abbreviated keys.
 */
const byteText = customType<{ data: string }>({ dataType: () => 'text COLLATE "C"' });

/**
 * pgvector's `vector` without a dimension, so one column holds whichever embedding model is
 * configured; searches cast to `vector(N)`, the IVFFlat index to `halfvec(N)`, for the configured N.
 */
const vector = customType<{ data: number[]; driverData: string }>({
  dataType: () => 'vector',
  toDriver: (value) => `[${value.join(',')}]`,
  fromDriver: (value) => JSON.parse(value) as number[],
});

export const documents = pgTable(
  'documents',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    characterId: text('character_id')
      .notNull()
      .references(() => characters.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    mimeType: text('mime_type').notNull(),
    fileSize: integer('file_size').notNull(),
    /** One of machines/document-status.ts' statuses. */
    status: text('status').notNull().default('pending'),
    chunkCount: integer('chunk_count').notNull().default(0),
    errorMessage: text('error_message'),
    /** Bumped by reprocess: a worker's result for an older generation is discarded. */
    generation: integer('generation').notNull().default(0),
    attempts: integer('attempts').notNull().default(0),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('documents_queue_idx').on(t.status, t.leaseExpiresAt), index('documents_character_idx').on(t.characterId, t.id)],
);

/**
 * A document's original bytes, in pieces of at most 1 MiB. PostgreSQL takes `bytea` as hex
 * text, and building one 100 MB statement for a 50 MB file held the event loop for a second;
 * pieces keep each statement small.
 */
export const documentParts = pgTable(
  'document_parts',
  {
    documentId: text('document_id')
      .notNull()
      .references(() => documents.id, { onDelete: 'cascade' }),
    part: integer('part').notNull(),
    bytes: bytea('bytes').notNull(),
  },
  (t) => [primaryKey({ columns: [t.documentId, t.part] })],
);

export const documentChunks = pgTable(
  'document_chunks',
  {
    id: text('id').primaryKey(),
    documentId: text('document_id')
      .notNull()
      .references(() => documents.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull(),
    characterId: text('character_id').notNull(),
    ordinal: integer('ordinal').notNull(),
    content: text('content').notNull(),
    tokenCount: integer('token_count').notNull(),
    page: integer('page'),
    headingPath: jsonb('heading_path').$type<string[]>().notNull().default(sql`'[]'::jsonb`),
    startOffset: integer('start_offset').notNull(),
    endOffset: integer('end_offset').notNull(),
    /**
     * Exists only where the server has pgvector (migration 0002 skips it otherwise, and startup
     * adds it once pgvector is installed), so queries name their columns instead of `select *`.
     */
    embedding: vector('embedding'),
    embeddingDims: integer('embedding_dims'),
  },
  (t) => [
    index('document_chunks_document_idx').on(t.documentId, t.ordinal),
    index('document_chunks_character_idx').on(t.characterId, t.id),
  ],
);

/**
 * Which chunks of a document hold each word (src/retrieval/words.ts), per block of 1,024 chunks
 * (ordinal >> 10): the offsets in the block when few (`members`), else a bitmap (`bits`, bit i
 * for offset i). Full-text search ranks a character's chunks from these
 * rows alone (src/retrieval/text-ranking.ts): a common word is a row per block, not per chunk.
 */
export const documentTerms = pgTable(
  'document_terms',
  {
    /** The document's character: a search reads each of the query's words once for all its documents. */
    characterId: text('character_id').notNull(),
    // No foreign key: a check per row cost a third of filling the index (about 18 term rows per
    // chunk). A trigger on documents removes a deleted document's rows (migration 0013), and
    // the chunk rows written in the same statement keep their key, which orders the write after
    // or before a delete of the document.
    documentId: text('document_id').notNull(),
    term: byteText('term').notNull(),
    block: integer('block').notNull(),
    /** Chunks of the block holding the term. */
    chunks: integer('chunks').notNull(),
    members: smallint('members').array(),
    bits: blockBits('bits'),
  },
  // Searched by (character, word): one index descent per word of the query, whatever the
  // character's documents, and an index-only scan, because migration 0014 makes the key INCLUDE
  // the sets (drizzle has no INCLUDE, so the snapshot shows the plain key). Deletes go by document.
  (t) => [
    primaryKey({ columns: [t.characterId, t.term, t.documentId, t.block] }),
    index('document_terms_document_idx').on(t.documentId),
  ],
);

/**
 * The characters whose chunks have an IVFFlat index of their own (character-vector-index.ts): a
 * partial index of one character's rows, so a search probes only its lists and visits no other
 * character's rows. A row is written once its index is valid and removed before it is dropped,
 * so a search that finds one can use the probes it gives.
 */
export const characterVectorIndexes = pgTable(
  'character_vector_indexes',
  {
    characterId: text('character_id')
      .notNull()
      .references(() => characters.id, { onDelete: 'cascade' }),
    dimensions: integer('dimensions').notNull(),
    indexName: text('index_name').notNull(),
    lists: integer('lists').notNull(),
    /** ivfflat.probes for searches through it. */
    probes: integer('probes').notNull(),
    /** The character's ready chunks when it was built: it is rebuilt once they double. */
    chunks: integer('chunks').notNull(),
    /** What its lists hold: `halfvec` (2 bytes a number) or `vector` (4; PGlite, where it is compared twice as fast). */
    element: text('element').notNull().default('halfvec'),
  },
  (t) => [primaryKey({ columns: [t.characterId, t.dimensions] })],
);

/**
 * Responses of /v1/responses kept for `previous_response_id` and GET (unless sent with
 * `store: false`). Items are the Responses API's own JSON: `input` as the request sent it,
 * `history` every item the model was given (earlier responses' context and output, then this
 * input with item references resolved; never instructions or a character's persona, which are
 * rebuilt per request), `output` what it produced, and `response` the whole response object.
 */
export const responses = pgTable(
  'responses',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    model: text('model').notNull(),
    input: jsonb('input').$type<Record<string, unknown>[]>().notNull(),
    history: jsonb('history').$type<Record<string, unknown>[]>().notNull(),
    output: jsonb('output').$type<Record<string, unknown>[]>().notNull(),
    response: jsonb('response').$type<Record<string, unknown>>().notNull(),
    createdAt: createdAt(),
  },
  (t) => [index('responses_project_idx').on(t.projectId, t.id)],
);
