import { describe, expect, it } from 'vitest';
import { documentStep, type DocumentEvent, type StoredDocumentStatus } from '../../machines/document-status.ts';

const step = (status: StoredDocumentStatus, type: DocumentEvent['type']) => documentStep(status, { type });

describe('document status machine', () => {
  it('takes a document from pending through processing to ready or failed', () => {
    expect(step('pending', 'claim')).toEqual({ accepted: true, next: 'processing', actions: [] });
    expect(step('processing', 'succeed')).toEqual({ accepted: true, next: 'ready', actions: [] });
    expect(step('processing', 'fail')).toEqual({ accepted: true, next: 'failed', actions: [] });
  });

  it('queues an upload once its parts are stored, and nothing else happens to one still uploading', () => {
    expect(step('uploading', 'stored')).toEqual({ accepted: true, next: 'pending', actions: ['requeue'] });
    expect(step('uploading', 'delete')).toEqual({ accepted: true, next: 'deleted', actions: ['removeChunks'] });
    for (const type of ['claim', 'succeed', 'fail', 'reprocess'] as const) expect(step('uploading', type)).toEqual({ accepted: false });
    for (const status of ['pending', 'processing', 'ready', 'failed'] as const) expect(step(status, 'stored')).toEqual({ accepted: false });
  });

  it('lets a worker take over a document whose previous worker died while processing', () => {
    expect(step('processing', 'claim')).toMatchObject({ accepted: true, next: 'processing' });
  });

  it('queues a document again when processing lost the database, and only one being processed', () => {
    expect(step('processing', 'retry')).toEqual({ accepted: true, next: 'pending', actions: ['requeue'] });
    for (const status of ['uploading', 'pending', 'ready', 'failed'] as const) expect(step(status, 'retry')).toEqual({ accepted: false });
  });

  it('requeues on reprocess from ready and failed, cancels running work, and leaves pending as it is', () => {
    expect(step('ready', 'reprocess')).toEqual({ accepted: true, next: 'pending', actions: ['requeue'] });
    expect(step('failed', 'reprocess')).toEqual({ accepted: true, next: 'pending', actions: ['requeue'] });
    expect(step('processing', 'reprocess')).toEqual({ accepted: true, next: 'pending', actions: ['cancelProcessing', 'requeue'] });
    expect(step('pending', 'reprocess')).toEqual({ accepted: true, next: 'pending', actions: [] });
  });

  it('deletes from any state, removing chunks and cancelling processing', () => {
    for (const status of ['pending', 'ready', 'failed'] as const) {
      expect(step(status, 'delete')).toEqual({ accepted: true, next: 'deleted', actions: ['removeChunks'] });
    }
    expect(step('processing', 'delete')).toEqual({ accepted: true, next: 'deleted', actions: ['cancelProcessing', 'removeChunks'] });
  });

  it('refuses results for documents that are not being processed, and claims of finished ones', () => {
    for (const status of ['pending', 'ready', 'failed'] as const) {
      expect(step(status, 'succeed')).toEqual({ accepted: false });
      expect(step(status, 'fail')).toEqual({ accepted: false });
    }
    expect(step('ready', 'claim')).toEqual({ accepted: false });
    expect(step('failed', 'claim')).toEqual({ accepted: false });
  });
});
