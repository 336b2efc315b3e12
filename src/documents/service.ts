import type { Invalidations } from '../cache/invalidations.ts';
import type { CharacterService } from '../characters/service.ts';
import { notify, type Db } from '../db/database.ts';
import { TroupeError, notFound } from '../errors.ts';
import type { Page } from '../projects/service.ts';
import type { DocumentIndex } from '../retrieval/document-index.ts';
import { documentStep, type DocumentEvent } from '../../machines/document-status.ts';
import { contentPieces, deleteDocumentRow, findDocument, finishUpload, insertUploading, listDocuments, setStatus, storePart, type DocumentInfo, type PartStore } from './repository.ts';
import { detectDocumentType } from './sniff.ts';

/** NOTIFY channel that wakes every process's document processor. */
export const DOCUMENTS_CHANNEL = 'troupe_documents';

export interface UploadedFile {
  name: string;
  declaredType: string | undefined;
  bytes: Uint8Array;
}

/**
 * Documents of a character: the REST side. Uploads are stored with their original bytes and
 * queued; processing (parse, chunk, embed, index) happens in the DocumentProcessor of any
 * process. Every status change goes through the document status machine.
 */
export class DocumentService {
  readonly #db: Db;
  readonly #parts: PartStore;
  readonly #characters: CharacterService;
  readonly #index: DocumentIndex;
  readonly #cancel: (documentId: string) => void;
  readonly #invalidations: Invalidations;

  constructor(deps: { database: PartStore; characters: CharacterService; index: DocumentIndex; invalidations: Invalidations; cancel: (documentId: string) => void }) {
    this.#db = deps.database.db;
    this.#parts = deps.database;
    this.#invalidations = deps.invalidations;
    this.#characters = deps.characters;
    this.#index = deps.index;
    this.#cancel = deps.cancel;
  }

  /** 404 unless the character is the project's; called before an upload's body is read. */
  async assertCharacter(projectId: string, characterId: string): Promise<void> {
    await this.#characters.get(projectId, characterId);
  }

  async upload(projectId: string, characterId: string, file: UploadedFile): Promise<DocumentInfo> {
    await this.assertCharacter(projectId, characterId);
    const detected = detectDocumentType(file.bytes, file.declaredType, file.name);
    if (!detected.ok) throw new TroupeError('unsupported_media_type', detected.message, { param: 'file' });
    // A statement per part, not one transaction for the whole file: on PGlite every statement
    // waits for an open transaction, and a 50 MB upload held every other request for 4-11 s.
    // Until finishUpload the document is `uploading`, which no read shows and no worker claims.
    const id = await insertUploading(this.#db, { projectId, characterId, name: file.name, mimeType: detected.mimeType, fileSize: file.bytes.byteLength });
    try {
      let part = 0;
      for (const piece of contentPieces(file.bytes)) await storePart(this.#parts, id, part++, piece);
      const document = await this.#db.transaction(async (tx) => {
        const queued = await finishUpload(tx, id);
        if (queued) await notify(tx, DOCUMENTS_CHANNEL, id);
        return queued;
      });
      if (!document) throw new TroupeError('not_found', `Character '${characterId}' was deleted during the upload.`, { param: 'characterId' });
      return document;
    } catch (err) {
      // Nothing half-stored stays behind (a process that dies here leaves it to removeStaleUploads).
      await deleteDocumentRow(this.#db, id).catch(() => undefined);
      throw err;
    }
  }

  async list(projectId: string, characterId: string, page: Page): Promise<DocumentInfo[]> {
    await this.assertCharacter(projectId, characterId);
    return listDocuments(this.#db, projectId, characterId, page);
  }

  async get(projectId: string, characterId: string, id: string): Promise<DocumentInfo> {
    await this.assertCharacter(projectId, characterId);
    const found = await findDocument(this.#db, projectId, characterId, id);
    if (!found) throw notFound('document', id);
    return publicInfo(found);
  }

  /** Back to `pending`; work under way is cancelled and its result discarded. */
  async reprocess(projectId: string, characterId: string, id: string): Promise<DocumentInfo> {
    const { document, actions } = await this.#apply(projectId, characterId, id, { type: 'reprocess' }, async (tx, step) => {
      if (step.actions.includes('requeue')) await notify(tx, DOCUMENTS_CHANNEL, id);
      return setStatus(tx, id, { status: 'pending', chunkCount: 0, errorMessage: null, bumpGeneration: step.actions.length > 0 });
    });
    if (actions.includes('cancelProcessing')) this.#cancel(id);
    return document;
  }

  /** Gone at once, with its chunks: retrieval stops using it in the same transaction. */
  async delete(projectId: string, characterId: string, id: string): Promise<{ id: string; deleted: true }> {
    const { actions } = await this.#apply(projectId, characterId, id, { type: 'delete' }, async (tx, step) => {
      if (step.actions.includes('removeChunks')) await this.#index.removeDocument(tx, id);
      await deleteDocumentRow(tx, id);
      return undefined;
    });
    if (actions.includes('cancelProcessing')) this.#cancel(id);
    return { id, deleted: true };
  }

  /** Locks the document, takes `event` through the status machine and runs `change` if accepted. */
  async #apply<T>(
    projectId: string,
    characterId: string,
    id: string,
    event: DocumentEvent,
    change: (tx: Parameters<Parameters<Db['transaction']>[0]>[0], step: { actions: string[] }) => Promise<T>,
  ): Promise<{ document: Exclude<T, undefined>; actions: string[] }> {
    await this.assertCharacter(projectId, characterId);
    const applied = await this.#db.transaction(async (tx) => {
      const found = await findDocument(tx, projectId, characterId, id, true);
      if (!found) throw notFound('document', id);
      const step = documentStep(found.status, event);
      if (!step.accepted) {
        throw new TroupeError('conflict', `A ${found.status} document cannot be ${event.type === 'delete' ? 'deleted' : 'reprocessed'}.`);
      }
      const result = await change(tx, step);
      // A ready document leaving retrieval changes what the character knows, in every process.
      if (found.status === 'ready') await this.#invalidations.publish(tx, 'characterDocuments', [characterId]);
      return { document: (result ?? found) as Exclude<T, undefined>, actions: step.actions, wasReady: found.status === 'ready' };
    });
    if (applied.wasReady) this.#invalidations.applyLocal('characterDocuments', [characterId]);
    return applied;
  }
}

function publicInfo(found: DocumentInfo): DocumentInfo {
  const { id, createdAt, characterId, name, mimeType, fileSize, status, chunkCount, errorMessage } = found;
  return { id, createdAt, characterId, name, mimeType, fileSize, status, chunkCount, errorMessage };
}
