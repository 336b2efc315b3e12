import { connect } from 'node:net';
import sharp from 'sharp';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentParts } from '../../src/db/schema.ts';
import { contentPieces, insertUploading, lockNextQueued, readContent, removeStaleUploads, storePart } from '../../src/documents/repository.ts';
import { deflatedEntry, LORE, makeDocx, makePdf, makeRawPdf, makeZip, pngHeader, renderTextPng } from '../support/document-fixtures.ts';
import { settled, upload } from '../support/documents.ts';
import { BACKENDS } from '../support/env.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket } from '../support/ws-client.ts';

type UpstreamBody = { messages: { role: string; content: string }[] };

describe.each(BACKENDS)('documents on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string };
  const docs = (path = '') => `/characters/${character.id}/documents${path}`;
  const send = (file: { name: string; type: string; bytes: Uint8Array | string }) => upload(f.t.url, f.key, character.id, file);
  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body as UpstreamBody);
  const systemPrompt = () => chats().at(-1)?.messages[0]?.content ?? '';

  beforeAll(async () => {
    f = await startV1Fixture(backend, { EMBEDDINGS_MODEL: 'fake-embed-1' });
    character = await f.api.post('/characters', { name: 'Keeper', description: 'The lighthouse keeper.' }).expect(201);
  });
  afterAll(() => f.close());

  it('accepts an upload with 202 pending, processes it to ready with chunks, and lists it', async () => {
    const { status, body } = await send({ name: 'lighthouse.md', type: 'text/markdown', bytes: LORE });
    expect(status).toBe(202);
    expect(body).toMatchObject({ characterId: character.id, name: 'lighthouse.md', mimeType: 'text/markdown', status: 'pending', chunkCount: 0, errorMessage: null });
    expect(body.id).toMatch(/^doc_/);
    expect(body.fileSize).toBe(Buffer.byteLength(LORE));
    const done = await settled(f.t, character.id, body.id, f.key);
    expect(done).toMatchObject({ status: 'ready', errorMessage: null });
    expect(done.chunkCount).toBeGreaterThan(0);
    const listed = await f.api.get(docs()).expect(200);
    expect(listed.map((d: { id: string }) => d.id)).toContain(body.id);
  });

  it.each([
    ['text/plain', 'notes.txt', async () => 'The ferry to Gullrock leaves at QUARTERMOON.'],
    ['text/markdown', 'notes.md', async () => '# Ferry\n\nThe ferry to Gullrock leaves at QUARTERMOON.'],
    ['text/html', 'notes.html', async () => '<html><head><style>p{}</style><script>var x = 1;</script></head><body><h1>Ferry</h1><p>The ferry to Gullrock leaves at QUARTERMOON.</p></body></html>'],
    ['application/pdf', 'notes.pdf', () => makePdf([{ heading: 'Ferry', paragraphs: ['The ferry to Gullrock leaves at QUARTERMOON.'] }])],
    [
      'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
      'notes.docx',
      () => makeDocx([{ heading: 'Ferry', level: 1 }, 'The ferry to Gullrock leaves at QUARTERMOON.']),
    ],
    // Its font maps A to U+0000, as broken PDF writers do: the page is still read (that glyph as U+FFFD).
    ['application/pdf', 'mapped.pdf', async () => makeRawPdf(new TextEncoder().encode('BT /F1 12 Tf 72 700 Td (GULLROCK FERRY A) Tj ET'), ['<41> <0000>']), 'GULLROCK'],
    // OCR: the fixture font has a few capitals, so the fact is spelled with those.
    ['image/png', 'sign.png', async () => renderTextPng('HOTEL ROUTE'), 'HOTEL ROUTE'],
    ['image/jpeg', 'sign.jpg', async () => new Uint8Array(await sharp(Buffer.from(renderTextPng('HOTEL ROUTE'))).jpeg({ quality: 100 }).toBuffer()), 'HOTEL ROUTE'],
    ['image/webp', 'sign.webp', async () => new Uint8Array(await sharp(Buffer.from(renderTextPng('HOTEL ROUTE'))).webp({ lossless: true }).toBuffer()), 'HOTEL ROUTE'],
  ])('reads %s (%s) and the character knows what it says', async (type, name, make, fact = 'QUARTERMOON') => {
    const reader = await f.api.post('/characters', { name: `Reader of ${name}` }).expect(201);
    const { status, body } = await upload(f.t.url, f.key, reader.id, { name, type, bytes: await make() });
    expect(status).toBe(202);
    expect(body.mimeType).toBe(type);
    const done = await settled(f.t, reader.id, body.id, f.key);
    expect(done).toMatchObject({ status: 'ready', errorMessage: null });
    expect(done.chunkCount).toBeGreaterThan(0);
    const conversation = await f.api.post('/conversations', { characterId: reader.id }).expect(201);
    f.upstream.script({ text: 'I know.' });
    const reply = await f.api.post(`/conversations/${conversation.id}/messages`, { content: `${fact}?` }).expect(200);
    expect(systemPrompt()).toContain(fact);
    expect(reply.citations[0]?.documentId).toBe(body.id);
  });

  it('grounds replies on every surface in the document, with citations', async () => {
    const { body: doc } = await send({ name: 'lore.md', type: 'text/markdown', bytes: LORE });
    await settled(f.t, character.id, doc.id, f.key);
    const conversation = await f.api.post('/conversations', { characterId: character.id }).expect(201);

    f.upstream.script({ text: 'It is AMBERGRIS-SEVEN.' });
    const reply = await f.api.post(`/conversations/${conversation.id}/messages`, { content: 'What is the password of the lamp room?' }).expect(200);
    expect(systemPrompt()).toContain('AMBERGRIS-SEVEN');
    expect(reply.citations.length).toBeGreaterThan(0);
    expect(reply.citations[0]).toMatchObject({ documentId: expect.stringMatching(/^doc_/), chunkId: expect.any(String), score: expect.any(Number) });
    expect(reply.citations.some((c: { excerpt: string }) => c.excerpt.includes('AMBERGRIS'))).toBe(true);

    // WebSocket: a citations event after the last chunk.
    const socket = await openSocket(`${f.t.url.replace('http', 'ws')}/conversations/${conversation.id}/ws?token=${f.key}`);
    await socket.next('ready');
    f.upstream.script({ text: 'Under the third step.' });
    socket.send({ content: 'Where is the spare key hidden?' });
    expect(await socket.reply()).toBe('Under the third step.');
    const cited = await socket.next();
    expect(cited.type).toBe('citations');
    expect((cited.citations as unknown[]).length).toBeGreaterThan(0);
    await socket.close();

    // /v1 with the character as model: citations on the non-streaming reply.
    f.upstream.script({ text: 'AMBERGRIS-SEVEN.' });
    const completion = await f.api.post('/v1/chat/completions', { model: character.id, stream: false, messages: [{ role: 'user', content: 'The lamp room password?' }] }).expect(200);
    expect(systemPrompt()).toContain('AMBERGRIS-SEVEN');
    expect(completion.citations.length).toBeGreaterThan(0);

    // Perform: the same knowledge in the NPC's prompt.
    f.upstream.script({ text: 'Built in 1821.' });
    await f.api.post('/perform', { npcId: character.id, history: [{ role: 'player', content: 'When was the lighthouse built by the Hollis family?' }] }).expect(200);
    expect(systemPrompt()).toContain('1821');
  });

  it('stops using a deleted document at once', async () => {
    const other = await f.api.post('/characters', { name: 'Smuggler' }).expect(201);
    const { body: doc } = await upload(f.t.url, f.key, other.id, { name: 'cove.txt', type: 'text/plain', bytes: 'The smugglers meet at Wrecker Cove when the moon is new.' });
    await settled(f.t, other.id, doc.id, f.key);
    const conversation = await f.api.post('/conversations', { characterId: other.id }).expect(201);
    f.upstream.script({ text: 'At the cove.' });
    await f.api.post(`/conversations/${conversation.id}/messages`, { content: 'Where do the smugglers meet?' }).expect(200);
    expect(systemPrompt()).toContain('Wrecker Cove');

    expect(await f.api.delete(`/characters/${other.id}/documents/${doc.id}`).expect(200)).toEqual({ id: doc.id, deleted: true });
    await f.api.get(`/characters/${other.id}/documents/${doc.id}`).expect(404);
    f.upstream.script({ text: 'I cannot say.' });
    const reply = await f.api.post(`/conversations/${conversation.id}/messages`, { content: 'Where do the smugglers meet?' }).expect(200);
    expect(systemPrompt()).not.toContain('Wrecker Cove');
    expect(reply.citations).toEqual([]);
  });

  it('reprocesses a document back to pending and to ready again, with the same chunks', async () => {
    const { body: doc } = await send({ name: 'again.txt', type: 'text/plain', bytes: 'Tides turn twice a day at Gullrock.' });
    const first = await settled(f.t, character.id, doc.id, f.key);
    const again = await f.api.post(docs(`/${doc.id}/reprocess`)).expect(200);
    expect(again).toMatchObject({ id: doc.id, status: 'pending', chunkCount: 0 });
    const second = await settled(f.t, character.id, doc.id, f.key);
    expect(second).toMatchObject({ status: 'ready', chunkCount: first.chunkCount });
  });

  it('embeds chunks exactly when the database has pgvector, and is ready either way', async () => {
    const embedCalls = () => f.upstream.requests.filter((r) => r.path === '/v1/embeddings').length;
    const before = embedCalls();
    const { body: doc } = await send({ name: 'modes.txt', type: 'text/plain', bytes: 'The ferry to Saltmere leaves at noon.' });
    expect((await settled(f.t, character.id, doc.id, f.key)).status).toBe('ready');
    expect(embedCalls() > before).toBe(backend.vectors);
  });

  // These hold processing at its embeddings call, which only exists with pgvector.
  it.runIf(backend.vectors)('deletes a document while it is processing: the work stops and nothing of it remains', async () => {
    const hold = f.upstream.holdEmbeddings();
    const { body: doc } = await send({ name: 'doomed.txt', type: 'text/plain', bytes: 'The doomed galleon sank off KESTREL POINT.' });
    await hold.arrived;
    expect((await f.api.get(docs(`/${doc.id}`)).expect(200)).status).toBe('processing');
    const finished = new Promise<void>((resolve) => {
      const stop = f.t.server.resources.documentProcessor.onDiscarded((e) => {
        if (e.documentId !== doc.id) return;
        stop();
        resolve();
      });
    });
    await f.api.delete(docs(`/${doc.id}`)).expect(200);
    hold.release();
    await finished;
    await f.api.get(docs(`/${doc.id}`)).expect(404);
    const conversation = await f.api.post('/conversations', { characterId: character.id }).expect(201);
    f.upstream.script({ text: 'No idea.' });
    await f.api.post(`/conversations/${conversation.id}/messages`, { content: 'Where did the galleon sink? KESTREL' }).expect(200);
    expect(systemPrompt()).not.toContain('KESTREL POINT');
  });

  it.runIf(backend.vectors)('reprocesses a document while it is processing: the running work is discarded and it is processed again', async () => {
    const hold = f.upstream.holdEmbeddings();
    const { body: doc } = await send({ name: 'twice.txt', type: 'text/plain', bytes: 'The bells of Gullrock ring at dusk.' });
    await hold.arrived;
    const again = await f.api.post(docs(`/${doc.id}/reprocess`)).expect(200);
    expect(again.status).toBe('pending');
    hold.release();
    const done = await settled(f.t, character.id, doc.id, f.key);
    expect(done.status).toBe('ready');
    expect(done.chunkCount).toBe(1);
  });

  it('contains hostile files: each is refused or fails with a message, and other requests are served meanwhile', async () => {
    const refusedOrFailed = async (file: { name: string; type: string; bytes: Uint8Array }) => {
      const health = f.t.client(null).get('/healthz');
      const { status, body } = await send(file);
      expect((await health).status).toBe(200);
      if (status === 415) return `415: ${body.error.message}`;
      expect(status).toBe(202);
      const done = await settled(f.t, character.id, body.id, f.key);
      expect({ name: file.name, status: done.status }).toEqual({ name: file.name, status: 'failed' });
      expect(done.errorMessage).toEqual(expect.any(String));
      return `failed: ${done.errorMessage}`;
    };
    const bomb = makeZip([deflatedEntry('[Content_Types].xml', '<Types/>'), { ...deflatedEntry('word/document.xml', new Uint8Array(300 * 1024 * 1024)), uncompressedSize: 1024 }]);
    expect(await refusedOrFailed({ name: 'bomb.docx', type: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', bytes: bomb })).toMatch(/failed|415/);
    const pdfBomb = makeRawPdf(new Uint8Array(300 * 1024 * 1024));
    expect(await refusedOrFailed({ name: 'bomb.pdf', type: 'application/pdf', bytes: pdfBomb })).toMatch(/^failed: /);
    expect(await refusedOrFailed({ name: 'huge.png', type: 'image/png', bytes: pngHeader(40_000, 40_000) })).toMatch(/failed: .*pixels/);
    const svg = new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg"><text>hi</text></svg>');
    expect(await refusedOrFailed({ name: 'picture.png', type: 'image/png', bytes: svg })).toMatch(/^415: /);
    const pdf = await makePdf([{ heading: 'Polyglot', paragraphs: ['Both a PDF and a ZIP.'] }]);
    const polyglot = new Uint8Array([...pdf, ...makeZip([deflatedEntry('a.txt', 'zip part')])]);
    // Rebase the ZIP directory past the PDF, as a real polyglot does, so both readers accept it.
    const eocd = new DataView(polyglot.buffer, polyglot.length - 22);
    eocd.setUint32(16, eocd.getUint32(16, true) + pdf.length, true);
    expect(await refusedOrFailed({ name: 'both.pdf', type: 'application/pdf', bytes: polyglot })).toMatch(/^415: /);
    expect(await refusedOrFailed({ name: 'report.pdf', type: 'application/pdf', bytes: renderTextPng('HOTEL') })).toMatch(/^415: /);
    expect(await refusedOrFailed({ name: 'cut.pdf', type: 'application/pdf', bytes: pdf.slice(0, Math.floor(pdf.length / 2)) })).toMatch(/^(415|failed): /);
  });

  it('refuses what it cannot take: 415 for other types, 400 without a file part, 404 for a foreign character', async () => {
    const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, ...new Array(60).fill(0)]);
    const refused = await send({ name: 'archive.zip', type: 'application/zip', bytes: zip });
    expect(refused.status).toBe(415);
    expect(refused.body.error.type).toBe('invalid_request_error');
    expect((await send({ name: 'empty.txt', type: 'text/plain', bytes: '' })).status).toBe(415);

    const form = new FormData();
    form.append('note', 'no file here');
    const noFile = await fetch(`${f.t.url}${docs()}`, { method: 'POST', headers: { authorization: `Bearer ${f.key}` }, body: form });
    expect(noFile.status).toBe(400);
    expect(((await noFile.json()) as { error: { param: string } }).error.param).toBe('file');

    const stranger = await f.t.newProject('stranger');
    const foreign = await upload(f.t.url, stranger.key, character.id, { name: 'a.txt', type: 'text/plain', bytes: 'hello' });
    expect(foreign.status).toBe(404);
    await f.api.get('/characters/char_missing/documents').expect(404);
    // Nothing was stored by the refused uploads.
    const names = (await f.api.get(docs()).expect(200)).map((d: { name: string }) => d.name);
    expect(names).not.toContain('archive.zip');
    expect(names).not.toContain('empty.txt');
  });

  it('keeps an upload whose parts are still being stored out of sight and out of the queue, and removes one left unfinished', async () => {
    const { database } = f.t.server.resources;
    const { db } = database;
    const owner = (await f.api.get(`/characters/${character.id}`).expect(200)) as { projectId: string };
    const id = await insertUploading(db, { projectId: owner.projectId, characterId: character.id, name: 'half.txt', mimeType: 'text/plain', fileSize: 3 * 1024 * 1024 });
    await storePart(database, id, 0, new Uint8Array(1024 * 1024).fill(65));
    await f.api.get(docs(`/${id}`)).expect(404);
    expect((await f.api.get(docs()).expect(200)).map((d: { id: string }) => d.id)).not.toContain(id);
    expect((await db.transaction((tx) => lockNextQueued(tx)))?.id).not.toBe(id);
    // Not stale yet: kept. Past the limit: gone, with its parts.
    expect(await removeStaleUploads(db, 60_000)).toBe(0);
    expect(await removeStaleUploads(db, 0)).toBe(1);
    expect(await db.select().from(documentParts).where(eq(documentParts.documentId, id))).toEqual([]);
    // A whole upload still goes through to pending, with every part.
    const { body } = await send({ name: 'three.txt', type: 'text/plain', bytes: 'Gullrock '.repeat(300_000) });
    expect(body.status).toBe('pending');
    expect((await db.select().from(documentParts).where(eq(documentParts.documentId, body.id))).length).toBe(3);
    await settled(f.t, character.id, body.id, f.key);
  });

  it('stores and reads back an original byte for byte, in parts, whatever its bytes', async () => {
    const { database } = f.t.server.resources;
    const { db } = database;
    const owner = (await f.api.get(`/characters/${character.id}`).expect(200)) as { projectId: string };
    // Every byte value, in a pattern that does not repeat at a part's boundary; the last part is short.
    const original = Uint8Array.from({ length: 2 * 1024 * 1024 + 1_001 }, (_, i) => (i * 7 + (i >> 11)) & 0xff);
    const id = await insertUploading(db, { projectId: owner.projectId, characterId: character.id, name: 'raw.bin', mimeType: 'application/octet-stream', fileSize: original.byteLength });
    let part = 0;
    for (const piece of contentPieces(original)) await storePart(database, id, part++, piece);
    expect(part).toBe(3);
    // The column holds the bytes themselves (not their text), and readContent gives them back.
    const stored = await db.select().from(documentParts).where(eq(documentParts.documentId, id)).orderBy(documentParts.part);
    expect(Buffer.concat(stored.map((row) => row.bytes)).equals(original)).toBe(true);
    expect(Buffer.from((await readContent(db, id)) ?? []).equals(original)).toBe(true);
    expect(await removeStaleUploads(db, 0)).toBe(1);
  });

  it('answers 413 as soon as a file passes 50 MB, without reading the rest', async () => {
    const url = new URL(`${f.t.url}${docs()}`);
    const boundary = 'troupe-test-boundary';
    const piece = Buffer.alloc(1024 * 1024, 0x61);
    const total = 200; // MB offered; far more than the limit
    // A raw socket: the reply may come while we are still writing, and writes may then fail
    // (the server stopped reading); what matters is the reply and how much was sent by then.
    const result = await new Promise<{ status: number; sentMb: number }>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname);
      let sent = 0;
      let reply = '';
      socket.on('data', (data: Buffer) => {
        reply += data.toString('latin1');
        const status = /^HTTP\/1\.1 (\d{3})/.exec(reply);
        if (status) {
          resolve({ status: Number(status[1]), sentMb: sent });
          socket.destroy();
        }
      });
      socket.on('error', () => {}); // EPIPE/ECONNRESET after the server stopped reading
      socket.on('close', () => reject(new Error(`closed without a reply after ${sent} MB`)));
      const head =
        `POST ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${f.key}\r\n` +
        `content-type: multipart/form-data; boundary=${boundary}\r\ntransfer-encoding: chunked\r\n\r\n`;
      const partHead = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.txt"\r\nContent-Type: text/plain\r\n\r\n`;
      const frame = (body: Buffer) => Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n')]);
      socket.write(head + '');
      socket.write(frame(Buffer.from(partHead)));
      const pump = () => {
        while (reply === '' && sent < total && !socket.destroyed) {
          sent++;
          if (!socket.write(frame(piece))) return void socket.once('drain', pump);
        }
      };
      pump();
    });
    expect(result.status).toBe(413);
    expect(result.sentMb).toBeLessThan(total);
  });
});
