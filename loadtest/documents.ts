/** Documents benchmark (`npm run bench:documents`): ingestion, retrieval. Method and knobs: docs/benchmarks.md, Documents: settings. */
import { randomFillSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { setTimeout as sleep } from 'node:timers/promises';
import { Document, HeadingLevel, ImageRun, Packer, Paragraph } from 'docx';
import { sql } from 'drizzle-orm';
import PDFDocument from 'pdfkit';
import { pino } from 'pino';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { executePrepared } from '../src/db/prepared-statement.ts';
import { characters, documents, projects } from '../src/db/schema.ts';
import { newId } from '../src/ids.ts';
import { openDocumentIndex } from '../src/retrieval/document-index.ts';
import { vectorHits } from '../src/retrieval/vector-search.ts';
import { startServer } from '../src/server.ts';
import { makePng } from '../test/support/document-fixtures.ts';
import { seeded } from '../test/support/vectors.ts';
import { attempt, childEnv, execFileAsync, gitState, logger, machine, ROOT, runBench, spawnTracked } from './support/children.ts';
import { envDatabaseUrl, envList, envNumber, envText } from './support/env.ts';
import { LoopMonitor, type LoopReport } from './support/probe.ts';
import { fixed, markdownTable, summarize, writeResults, type Summary } from './support/report.ts';
import { callJson, createCharacter, freshStore, newBootstrapKey, startTroupe } from './support/troupe.ts';

const PARTS = envList('BENCH_PARTS', ['ingest', 'retrieval'] as const);
const BACKENDS = envList('BENCH_BACKENDS', ['postgres', 'pglite'] as const);
const DATABASE_URL = envDatabaseUrl(); // BENCH_DATABASE_URL: temporary databases are made and dropped there
const RUNS = envNumber('BENCH_RUNS', 1, 1); // of each ingest
const MODES = envList('BENCH_MODES', ['process', 'in-process'] as const);
const FILE_KINDS = envList('BENCH_INGEST_FILES', ['text', 'pdf', 'docx'] as const);
const [MB, WARMUP, LIMIT] = [1_048_576, 20, 6];
const INGEST_BYTES = Math.floor(envNumber('BENCH_INGEST_MB', 49.9, 1, false) * MB); // the upload limit is 50 MiB
const [RESOLUTION_MS, INGEST_TIMEOUT_MS] = [envNumber('BENCH_LOOP_RESOLUTION_MS', 2, 1), envNumber('BENCH_INGEST_TIMEOUT_SEC', 600, 10) * 1000];
const knob = (backend: Backend, name: string) => `BENCH_${backend === 'pglite' && envText(`BENCH_PGLITE_${name}`) ? 'PGLITE_' : ''}${name}`;
const TIERS = (backend: Backend) => (envText(knob(backend, 'TIERS')) ?? '10000,30000,100000').split(',').map(Number);
const OTHERS_CHUNKS = (backend: Backend) => envNumber(knob(backend, 'OTHERS_CHUNKS'), 200_000, 0);
const DIMENSIONS = envNumber('BENCH_DIMENSIONS', 256, 1);
const QUERIES = envNumber('BENCH_QUERIES', 300, 10); // per tier and mode, after WARMUP unmeasured ones
const RATE = envNumber('BENCH_RATE', 20, 1, false); // queries/s
const WRITERS = envNumber('BENCH_WRITERS', 2, 1); // documents written at once while filling, as the processor's concurrency
const MAINTENANCE = ['vacuum analyze document_chunks', 'vacuum analyze document_terms', 'analyze documents', 'checkpoint'];
type Backend = (typeof BACKENDS)[number];
const log = logger('bench:documents');
const f = (v: number | null | undefined, digits = 1) => fixed(v, digits, 'n/a');
/** Milliseconds until `work()` settles, counted from before it starts. */
const timed = (work: () => Promise<unknown>, t0 = performance.now()) => work().then(() => performance.now() - t0);
// Seeded English-like text (same seed, same bytes): function words as common as in English prose (the 'simple'
// text-search configuration keeps them, so they match nearly every chunk), then made-up words in a long Zipf tail.
const FUNCTION_WORDS = ('the of and to a in that is was he for it with as his on be at by i this had not are but from or have an ' +
  'they which one you were her all she there would their we him been has when who will more no if out so said what up its about ' +
  'into than them can only other new some could time these two may then do first any my now such like our over man me even most ' +
  'made after also did many before must through back years where much your way well down should because each').split(' ');
/** The vocabulary, most frequent first: the function words, then 20,000 made-up content words. */
const SYLLABLES = 'ka ter lo mar in ven do ris al the on gra sel bu ric an mo dun e pha tor li wen ost'.split(' ');
const VOCABULARY = new Set(FUNCTION_WORDS);
for (const random = seeded(7); VOCABULARY.size < FUNCTION_WORDS.length + 20_000;) {
  VOCABULARY.add(Array.from({ length: 2 + Math.floor(random() * 3) }, () => SYLLABLES[Math.floor(random() * SYLLABLES.length)]).join(''));
}
const WORDS = [...VOCABULARY];
/** Words drawn with weight 1 / rank into sentences of 8-22 words and paragraphs of 3-7 sentences. */
function prose(seed: number) {
  const random = seeded(seed);
  let sum = 0;
  const cumulative = Float64Array.from(WORDS, (_, i) => (sum += 1 / (i + 1)));
  const word = () => {
    const target = random() * sum;
    // Binary search for the first word whose cumulative weight reaches `target`.
    let i = 0;
    for (let step = 2 ** 15; step >= 1; step /= 2) if ((cumulative[i + step - 1] ?? Infinity) < target) i += step;
    return WORDS[i]!;
  };
  const upperFirst = (w: string) => `${w.charAt(0).toUpperCase()}${w.slice(1)}`;
  const times = <T>(min: number, spread: number, make: () => T) => Array.from({ length: min + Math.floor(random() * spread) }, make);
  const paragraph = () => times(3, 5, () => `${upperFirst(times(8, 15, word).join(' '))}.`).join(' ');
  /** Paragraphs until they hold `chars` characters, counting a separator of `sep` between two. */
  const paragraphs = (chars: number, sep = 0) => {
    const out: string[] = [];
    for (let size = -sep; size < chars; size += out.at(-1)!.length + sep) out.push(paragraph());
    return out;
  };
  return { paragraphs, heading: () => times(2, 4, () => upperFirst(word())).join(' ') };
}
/** Sections of a heading, a noise image (deflate cannot shrink it; the images make about `bytes`) and `chars` of text. */
function sections(seed: number, count: number, chars: number, bytes: number) {
  const text = prose(seed);
  const side = Math.floor(Math.sqrt(bytes / count) * 0.97);
  const image = () => Buffer.from(makePng(side, side, randomFillSync(new Uint8Array(side * side))));
  return Array.from({ length: count }, () => ({ heading: text.heading(), image: image(), paragraphs: text.paragraphs(chars) }));
}
/** The files to ingest, about `bytes` long: pdf and docx are 2 MiB of text plus one noise image per page/section (as real ones). */
const FILES = {
  text: ['big.txt', 'text/plain', async (bytes: number) => Buffer.from(prose(1).paragraphs(bytes).join('\n\n').slice(0, bytes))],
  pdf: ['big.pdf', 'application/pdf', async (bytes: number) => {
    const doc = new PDFDocument({ autoFirstPage: false, compress: true });
    for (const page of sections(4, 300, 1_800, bytes - 2 * MB)) {
      doc.addPage().fontSize(18).text(page.heading).image(page.image, { fit: [200, 150] });
      for (const paragraph of page.paragraphs) doc.fontSize(10).text(paragraph);
    }
    doc.end();
    return new Uint8Array(await buffer(doc));
  }],
  docx: ['big.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', async (bytes: number) =>
    Packer.toBuffer(new Document({ sections: [{ children: sections(5, 100, 3_000, bytes - 2 * MB).flatMap((section) => [
      new Paragraph({ text: section.heading, heading: HeadingLevel.HEADING_1 }),
      new Paragraph({ children: [new ImageRun({ type: 'png', data: section.image, transformation: { width: 200, height: 200 } })] }),
      ...section.paragraphs.map((text) => new Paragraph({ text })),
    ]) }] }))],
} as const;
type StagedFile = { id: string; name: string; mimeType: string; path: string; bytes: number };
/** GET /healthz every 5 ms from a child process that does nothing else: a load balancer's health check runs on another machine, so
 * the prober gets a core first (nice -10 where allowed) and its own stalls are not counted as Troupe's. */
const PROBER = `import { Agent, get } from 'node:http';
const agent = new Agent({ keepAlive: true, maxSockets: 1 }), ms = [];
let on = true;
process.stdin.on('end', () => (on = false)).resume();
while (on) {
  const t0 = performance.now();
  await new Promise((done) => get(process.argv[1], { agent }, (res) => res.resume().on('end', done)).on('error', done));
  ms.push(performance.now() - t0);
  await new Promise((done) => setTimeout(done, 5));
}
process.stdout.write(JSON.stringify(ms));`;
/** Probes until stopped (with a url: in-process there is none, it would load the measured loop); then `window()`. */
function probeHealthz(url: string | null, window: () => Promise<LoopReport>) {
  const args = ['--input-type=module', '-e', PROBER, `${url}/healthz`];
  const child = url ? spawnTracked({ name: 'healthz', command: process.execPath, args, env: childEnv({}), cwd: ROOT, stdin: 'pipe',
    keepOutput: true }) : null;
  if (child) attempt(() => setPriority(child.pid, -10));
  return async () => {
    child?.child.stdin.end();
    const sent = child && (await child.exited).code === 0 ? /\[[\d.,e+-]*\]/.exec(child.output())?.[0] : undefined;
    const latencies = sent ? (JSON.parse(sent) as number[]) : [];
    return { healthz: latencies.length ? summarize(latencies) : null, loop: await window() };
  };
}
async function measureIngest(file: StagedFile, backend: Backend, mode: (typeof MODES)[number], run: number) {
  const label = `ingest ${file.id} ${backend} ${mode} #${run}`;
  const [key, store] = [newBootstrapKey(), await freshStore(backend, DATABASE_URL)];
  const cleanup: (() => Promise<unknown>)[] = [store.dispose];
  try {
    let t: { url: string; window: () => Promise<LoopReport> };
    if (mode === 'process') {
      const options = { probe: { loopResolutionMs: RESOLUTION_MS }, readyTimeoutMs: 120_000 };
      const troupe = await startTroupe({ name: 'troupe-documents', engine: 'node', key, settings: store.env, ...options });
      cleanup.unshift(() => troupe.stop(15_000));
      t = { url: troupe.base, window: async () => (await troupe.probe(30_000)).loop as LoopReport };
    } else {
      const env = { PORT: '0', HOST: '127.0.0.1', HTTP_ENGINE: 'node', TROUPE_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn', ...store.env };
      const [server, monitor] = [await startServer(loadConfig(env), pino({ level: 'silent' })), new LoopMonitor(RESOLUTION_MS)];
      cleanup.unshift(() => (monitor.stop(), server.stop()));
      t = { url: server.url, window: async () => monitor.window() };
    }
    const api = { base: t.url, auth: `Bearer ${key}` };
    const characterId = await createCharacter(api, 'Archivist', 'Answers from the documents.');
    // Two idle seconds first: the floor each number should be read against.
    await t.window();
    const stopIdle = probeHealthz(mode === 'process' ? t.url : null, t.window);
    await sleep(2_000);
    const { healthz: healthzIdle, loop: idle } = await stopIdle();
    const stopBusy = probeHealthz(mode === 'process' ? t.url : null, t.window);
    const t0 = performance.now();
    const { stdout } = await execFileAsync('curl', ['-sS', '--max-time', '600', '-H', `authorization: ${api.auth}`, '-w', '\n%{http_code}',
      '-F', `file=@${file.path};type=${file.mimeType};filename=${file.name}`, `${t.url}/characters/${characterId}/documents`]);
    const [body = '', code] = stdout.split(/\n(?=\d+$)/);
    if (code !== '202') throw new Error(`upload of ${file.id}: HTTP ${code}: ${body.slice(0, 300)}`);
    const uploadMs = performance.now() - t0;
    const path = `/characters/${characterId}/documents/${(JSON.parse(body) as { id: string }).id}`;
    let doc: { status: string; chunkCount: number; errorMessage: string | null };
    while ((doc = await callJson(api, 'GET', path, undefined, 200)).status !== 'ready' && doc.status !== 'failed') {
      if (performance.now() - t0 - uploadMs > INGEST_TIMEOUT_MS) throw new Error(`${label}: still ${doc.status} after the timeout`);
      await sleep(200);
    }
    const processMs = performance.now() - t0 - uploadMs;
    const { healthz, loop } = await stopBusy();
    const { status, chunkCount, errorMessage } = doc;
    return { file: file.id, backend, mode, run, status, chunkCount, errorMessage, uploadMs, processMs, idle, loop, healthz, healthzIdle };
  } finally {
    for (const step of cleanup) await step().catch((err: unknown) => log(`${label}: cleanup failed: ${String(err)}`));
  }
}
async function measureRetrieval(backend: Backend) {
  const store = await freshStore(backend, DATABASE_URL);
  const { db, ownConnection, close } = await openDatabase({ databaseUrl: store.url, dataDir: store.dir ?? '', poolSize: 4 });
  try {
    // As the server opens it: character indexes are built CONCURRENTLY where there is a server.
    const index = await openDocumentIndex({ db, ownConnection, logger: pino({ level: 'warn' }), dimensions: DIMENSIONS, embeddings: true });
    const projectId = newId('project');
    await db.insert(projects).values({ id: projectId, name: 'bench' });
    const owners = Array.from({ length: 30 }, () => ({ projectId, characterId: newId('character') }));
    await db.insert(characters).values(owners.map((owner, i) => ({ id: owner.characterId, projectId, name: `character ${i}` })));
    const [target, others, text, vectorRandom] = [owners[0]!, owners.slice(1), prose(11), seeded(12)] as const;
    // Unit vectors around 64 topic centres: embeddings cluster by subject, as real ones do.
    const noise = (scale: number) => Array.from({ length: DIMENSIONS }, () => (vectorRandom() * 2 - 1) * scale);
    const centres = Array.from({ length: 64 }, () => noise(1));
    const nextVector = () => {
      const centre = centres[Math.floor(vectorRandom() * centres.length)]!;
      const v = noise(0.8).map((x, i) => x + centre[i]!);
      const norm = Math.hypot(...v) || 1;
      return v.map((x) => Math.round((x / norm) * 1e4) / 1e4);
    };
    const [fill, upkeep] = [{ chunks: 0, writeMs: 0, upkeepWaitMs: 0 }, [] as Promise<void>[]];
    // `chunks` more for each owner as the processor writes them: ready documents of up to 1,000 chunks, each followed by its upkeep, by
    // WRITERS writers that take the next as they finish one (as its slots do). A batch's rows (85 µs a chunk) are made before its clock.
    const fillUp = async (fillOwners: (typeof owners)[number][], chunks: number) => {
      const jobs = fillOwners.flatMap((owner) =>
        Array.from({ length: Math.ceil(chunks / 1_000) }, (_, i) => ({ owner, count: Math.min(1_000, chunks - i * 1_000) })));
      for (let from = 0; from < jobs.length; from += WRITERS * 4) {
        const batch = jobs.slice(from, from + WRITERS * 4).map((job) => {
          const [headingPath, texts] = [[text.heading()], Array.from({ length: job.count }, () => text.paragraphs(1_500, 2).join('\n\n'))];
          const rows = texts.map((content, ordinal) =>
            ({ ordinal, content, tokenCount: Math.ceil(content.length / 4), page: null, headingPath, startOffset: 0, endOffset: content.length }));
          return { ...job, rows, embeddings: rows.map(() => nextVector()) };
        });
        fill.writeMs += await timed(() => Promise.all(Array.from({ length: WRITERS }, async () => {
          for (let job = batch.shift(); job; job = batch.shift()) {
            const [doc, { count, rows, embeddings }] = [{ id: newId('document'), ...job.owner }, job];
            await db.transaction(async (tx) => {
              await tx.insert(documents).values({ ...doc, name: 'part.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready', chunkCount: count });
              await index.replaceChunks(tx, doc, rows, embeddings);
            });
            fill.chunks += count;
            upkeep.push(index.afterWrite({ characterId: doc.characterId }));
          }
        })));
      }
    };
    await fillUp(others, Math.ceil(OTHERS_CHUNKS(backend) / others.length));
    // In turn: keyword (2-3 content words), question (a template around them), common (the template around frequent words).
    const [queryRandom, content] = [seeded(21), WORDS.slice(FUNCTION_WORDS.length)];
    const common = [...FUNCTION_WORDS.slice(40), ...content.slice(0, 40)]; // frequent words the stopword list keeps: each in many chunks
    const templates = ['What did the {} do with the {}?', 'Where is the {} of {}?', 'Tell me about the {} and the {}.',
      'Who has the {} now that {} is gone?'];
    const queries = Array.from({ length: QUERIES + WARMUP }, (_, i) => {
      const kind = ['keyword', 'question', 'common'][i % 3]!;
      const [pool, skew] = kind === 'common' ? [common, 1] : [content, 3];
      const pick = () => pool[Math.floor(pool.length * queryRandom() ** skew)]!;
      if (kind !== 'keyword') return { kind, text: templates[i % 4]!.replace(/\{\}/g, pick), vector: nextVector() };
      return { kind, text: Array.from({ length: 2 + Math.floor(queryRandom() * 2) }, pick).join(' '), vector: nextVector() };
    });
    const tiers = [];
    for (const tier of TIERS(backend)) {
      await fillUp([target], tier - (tiers.at(-1)?.chunks ?? 0));
      // Measured once the builds the writes started are done (a retraining left running deadlocked with the VACUUM below, then ran in the searches).
      fill.upkeepWaitMs += await timed(() => Promise.all([...upkeep.splice(0), index.whenRetrained()]));
      // As autovacuum soon after a bulk load (the planner needs it to pick indexes); the WAL written now, not mid-queries.
      for (const statement of MAINTENANCE) await db.execute(sql.raw(statement));
      // mode (the searches, then the floor on the same schedule: a hybrid search's round trips, two at once then one, with no work)
      // -> kind (all, keyword, question, common) -> [latency ms, results] of each measured query.
      const samples: Record<string, Record<string, [number, number][]>> = {};
      const [started, trip, searches] = [performance.now(), () => executePrepared(db, sql`select 1`), queries.length * 2];
      for (let slot = 0; slot < searches + QUERIES; slot++) {
        const [query, mode] = [queries[(slot % searches) >> 1]!, slot >= searches ? 'floor' : slot % 2 === 0 ? 'fulltext' : 'hybrid'];
        if (mode === 'hybrid' && !index.vectors) continue;
        const at = started + (slot * 1000) / RATE;
        if (at > performance.now()) await sleep(at - performance.now());
        const found = mode === 'floor' ? await Promise.all([trip(), trip()]).then(trip).then(() => [])
          : await index.search({ ...target, text: query.text, embedding: mode === 'hybrid' ? query.vector : null, limit: LIMIT });
        const [ms, kinds] = [performance.now() - at, slot >> 1 < WARMUP ? [] : mode === 'floor' ? ['all'] : ['all', query.kind]];
        for (const kind of kinds) ((samples[mode] ??= {})[kind] ??= []).push([ms, found.length]);
      }
      // minResults: the fewest results of a query (6: each filled its top 6).
      const latency = Object.fromEntries(Object.entries(samples).map(([mode, kinds]) => [mode, Object.fromEntries(Object.entries(kinds).map(
        ([kind, some]) => [kind, { ...summarize(some.map(([ms]) => ms)), minResults: Math.min(...some.map(([, n]) => n)) }]))]));
      // The mean share of the exact cosine top 6 that the approximate (IVFFlat) search returns.
      let recalled = 0;
      for (const { vector } of index.vectors ? queries.slice(0, 30) : []) {
        const [exact, approx] = await Promise.all([Infinity, 0].map((exactUpTo) => vectorHits(db, target, vector, LIMIT, { exactUpTo })));
        recalled += approx!.filter((hit) => exact!.some(({ id }) => id === hit.id)).length / LIMIT;
      }
      tiers.push({ chunks: tier, total: fill.chunks, latency, vectorRecall: index.vectors ? recalled / 30 : null });
    }
    return { backend, vectors: index.vectors as boolean, fill: { ...fill, chunksPerSec: fill.chunks / (fill.writeMs / 1000) }, tiers };
  } finally {
    await close();
    await store.dispose();
  }
}
runBench('bench:documents', envNumber('BENCH_MAX_RUN_SEC', 3600, 60) * 1000, async ({ stamp }) => {
  const git = await gitState();
  const out: Record<string, unknown> = { stamp, machine: machine(), git, parts: PARTS, runs: RUNS };
  const sections: string[] = [];
  if (PARTS.includes('ingest')) {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-doc-bench-files-'));
    try {
      const files: StagedFile[] = [];
      for (const id of FILE_KINDS) {
        const [name, mimeType, make] = FILES[id];
        const data = await make(INGEST_BYTES);
        await writeFile(join(dir, name), data);
        files.push({ id, name, mimeType, path: join(dir, name), bytes: data.byteLength });
      }
      const cases = files.flatMap((file) => BACKENDS.flatMap((backend) => MODES.map((mode) => [file, backend, mode] as const)));
      const results: Awaited<ReturnType<typeof measureIngest>>[] = [];
      for (let run = 1; run <= RUNS; run++) {
        for (const [file, backend, mode] of cases) results.push(await measureIngest(file, backend, mode, run));
      }
      out.ingest = results;
      const columns: [string, (r: (typeof results)[number]) => string][] = [
        ['chunks', (r) => (r.status === 'ready' ? String(r.chunkCount) : r.status)],
        ['upload + processing s', (r) => `${f(r.uploadMs / 1000)} + ${f(r.processMs / 1000)}`],
        ['idle loop p99 ms', (r) => f(r.idle.p99)], ['loop p50 ms', (r) => f(r.loop.p50)],
        ['loop p99 ms', (r) => f(r.loop.p99)], ['loop max ms', (r) => f(r.loop.max, 0)],
        ['stalls > 20 ms: count (time)', (r) => `${r.loop.stallCount} (${f(r.loop.stalledMs / 1000)} s)`],
        ['GET /healthz p50, p99, max ms', (r) => (r.healthz ? `${f(r.healthz.p50)}, ${f(r.healthz.p99)}, ${f(r.healthz.max, 0)}` : '-')],
        ['longest stalls ms', (r) => r.loop.stalls.slice(0, 3).map(([, ms]) => ms).join(',') || '-'],
      ];
      // One row per file, backend and mode; each cell joins its runs as `a / b`.
      const rows = cases.map(([file, backend, mode]) => {
        const runs = results.filter((r) => r.file === file.id && r.backend === backend && r.mode === mode);
        return [`${file.id} ${(file.bytes / MB).toFixed(1)} MiB`, backend, mode, ...columns.map(([, cell]) => runs.map(cell).join(' / '))];
      });
      sections.push(`### (b) Ingestion end to end: main-thread event-loop delay (goal p99 < 20 ms)\n\n${markdownTable(
        ['file', 'backend', 'mode', ...columns.map(([name]) => name)], rows)}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  if (PARTS.includes('retrieval')) {
    const results = [];
    for (const backend of BACKENDS) results.push(await measureRetrieval(backend));
    out.retrieval = results;
    const pair = (s: Summary | undefined) => (s ? `${f(s.p50, 2)} / ${f(s.p99, 2)}` : '-');
    const rows = results.flatMap((r) => r.tiers.flatMap((tier) => Object.entries(tier.latency).map(([mode, { all, ...kinds }]) => [
      r.backend, tier.chunks, tier.total, mode, pair(all), f(all?.max, 1), pair(kinds.keyword), pair(kinds.question), pair(kinds.common),
      mode === 'floor' ? '-' : all?.minResults ?? '-', mode === 'hybrid' ? f(tier.vectorRecall, 3) : ''])));
    const fills = results.map((r) => `${r.backend}: ${r.fill.chunks} chunks written in ${f(r.fill.writeMs / 1000, 0)} s ` +
      `(${f(r.fill.chunksPerSec, 0)} chunks/s, vectors ${r.vectors}; then ${f(r.fill.upkeepWaitMs / 1000, 1)} s waiting for index builds)`);
    const header = ['backend', 'chunks (character)', 'chunks (index)', 'mode', 'p50 / p99 ms', 'max ms', 'keyword p50 / p99',
      'question p50 / p99', 'common-word p50 / p99', 'fewest results', 'vector recall@6'];
    sections.push(`### (c) Retrieval: DocumentIndex.search, top 6, one character in a shared index, ${RATE} queries/s (goal p99 <= 5 ms ` +
      `PostgreSQL, <= 20 ms PGlite)\n\n${markdownTable(header, rows)}\n\nFill (replaceChunks: chunk rows, document_terms chunk sets, ` +
      `the IVFFlat vector index and its retraining): ${fills.join('; ')}.`);
  }
  const changes = git.dirtySrc.length ? ` with uncommitted changes in ${git.dirtySrc.length} src/ file(s)` : '';
  const markdown = `${sections.join('\n\n')}\n\nTroupe at ${git.head}${changes}.`;
  process.stdout.write(`\n${markdown}\n\nRaw results: ${(await writeResults('documents', stamp, out, markdown)).json}\n`);
});
