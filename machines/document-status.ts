import { setup, transition } from 'xstate';

export type DocumentStatus = 'pending' | 'processing' | 'ready' | 'failed';
/** What the database holds: the statuses above, and `uploading` while an upload's parts are stored. */
export type StoredDocumentStatus = DocumentStatus | 'uploading';

export type DocumentEvent =
  /** The upload's last part is stored: the document joins the queue. */
  | { type: 'stored' }
  /** A worker takes the document (also one whose previous worker's lease ran out). */
  | { type: 'claim' }
  | { type: 'succeed' }
  | { type: 'fail' }
  /** The database stopped answering mid-way: nothing was at fault, the document waits to be claimed again. */
  | { type: 'retry' }
  | { type: 'reprocess' }
  | { type: 'delete' };

/** Side effects the caller carries out when a transition names them. */
export type DocumentAction = 'cancelProcessing' | 'removeChunks' | 'requeue';

/**
 * A document's status, as the interface defines it:
 *
 *   uploading --stored--> pending   (uploading is never shown: the upload's request has not returned)
 *   pending --claim--> processing --succeed--> ready
 *                                 --fail-----> failed
 *                                 --retry----> pending   (the database stopped answering mid-way)
 *   ready | failed | processing --reprocess--> pending   (processing: the running work is cancelled)
 *   any --delete--> deleted (chunks removed; processing cancelled)
 *
 * The status lives in PostgreSQL; each step resolves the stored status in this machine and
 * takes the transition, so an event a status does not accept is refused, never applied.
 */
const documentStatusMachine = setup({
  types: { events: {} as DocumentEvent },
  actions: {
    cancelProcessing: () => {},
    removeChunks: () => {},
    requeue: () => {},
  },
}).createMachine({
  id: 'documentStatus',
  initial: 'uploading',
  states: {
    uploading: {
      on: { stored: 'pending', delete: 'deleted' },
    },
    pending: {
      entry: 'requeue',
      on: {
        claim: 'processing',
        // Already waiting: reprocessing changes nothing.
        reprocess: 'pending',
        delete: 'deleted',
      },
    },
    processing: {
      on: {
        claim: { target: 'processing', reenter: true },
        succeed: 'ready',
        fail: 'failed',
        retry: 'pending',
        reprocess: { target: 'pending', actions: 'cancelProcessing' },
        delete: { target: 'deleted', actions: 'cancelProcessing' },
      },
    },
    ready: {
      on: { reprocess: 'pending', delete: 'deleted' },
    },
    failed: {
      on: { reprocess: 'pending', delete: 'deleted' },
    },
    deleted: {
      type: 'final',
      entry: 'removeChunks',
    },
  },
});

export type DocumentStep = { accepted: true; next: DocumentStatus | 'deleted'; actions: DocumentAction[] } | { accepted: false };

/** What `event` does to a document in `status`: the next status and the actions to carry out. */
export function documentStep(status: StoredDocumentStatus, event: DocumentEvent): DocumentStep {
  const snapshot = documentStatusMachine.resolveState({ value: status, context: undefined });
  if (!snapshot.can(event)) return { accepted: false };
  const [next, actions] = transition(documentStatusMachine, snapshot, event);
  return {
    accepted: true,
    next: next.value as DocumentStatus | 'deleted',
    actions: actions.map((action) => action.type).filter((type): type is DocumentAction => ['cancelProcessing', 'removeChunks', 'requeue'].includes(type)),
  };
}
