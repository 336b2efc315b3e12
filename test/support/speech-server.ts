// A real local speech server speaking OpenAI's audio wire format, for voice tests that must run
// offline: /v1/audio/speech synthesizes with flite, /v1/audio/transcriptions recognizes with
// pocketsphinx restricted to a grammar of the phrases the test expects, so a round trip of
// synthesized speech comes back as the exact text. Both are Debian packages (.ci/run installs
// them): flite, pocketsphinx and pocketsphinx-en-us.
import { execFile } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { accessSync, constants, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import busboy from 'busboy';
import { decodeWav, encodeWav } from '../../src/voice/wav.ts';
import { readBody, sendError, sendJson, write } from './openai/http.ts';
import { isRecord } from './openai/wire.ts';

const run = promisify(execFile);

const MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';
const ACOUSTIC_MODEL = `${MODEL_DIR}/en-us`;
const DICTIONARY = `${MODEL_DIR}/cmudict-en-us.dict`;
const TOOLS = ['flite', 'pocketsphinx_batch'] as const;
/** What OpenAI's `pcm` format is; the recognizer's acoustic model wants 16 kHz. */
const SPEECH_RATE = 24_000;
const RECOGNIZER_RATE = 16_000;
/** 100 ms of PCM per write, so long lines arrive as many chunks. */
const CHUNK_BYTES = (SPEECH_RATE / 10) * 2;
/** OpenAI's own limits. */
const MAX_INPUT_CHARS = 4096;
const MAX_FILE_BYTES = 25 * 1024 * 1024;
/** A hung tool fails its request rather than the test's timeout. */
const TOOL_TIMEOUT_MS = 30_000;
/** flite's voices; any other requested voice (alloy, a character's voiceId) is spoken by slt. */
const FLITE_VOICES = new Set(['kal', 'kal16', 'awb', 'rms', 'slt']);

/** What is missing on this machine for the server to work; empty when it can start. */
export function missingSpeechTools(): string[] {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  const missing: string[] = TOOLS.filter((tool) => !dirs.some((dir) => executable(join(dir, tool))));
  if (!readable(`${ACOUSTIC_MODEL}/mdef`) || !readable(DICTIONARY)) missing.push(`pocketsphinx-en-us (${MODEL_DIR})`);
  return missing;
}

export interface SpeechRecord {
  model: string;
  input: string;
  voice: string;
  responseFormat: string;
  instructions: string | undefined;
}

export interface TranscriptionRecord {
  model: string;
  /** Of the uploaded file. */
  sampleRate: number;
  seconds: number;
  text: string;
}

export interface SpeechServer {
  /** `http://127.0.0.1:<port>/v1`, as the openai SDK's baseURL. */
  baseUrl: string;
  /** Every accepted /audio/speech request, in order. */
  speechRequests: SpeechRecord[];
  /** Every answered /audio/transcriptions request, in order. */
  transcriptions: TranscriptionRecord[];
  /** `speech-closed` ({completed}) when a speech response ended or its client left. */
  events: EventEmitter;
  /** The next speech response sends this many chunks, then holds until its client leaves (streaming and cancellation tests). */
  stallNextSpeech(afterChunks: number): void;
  /** The recognizer hears only these (matched ignoring case and punctuation) and answers them as written. */
  expectPhrases(phrases: readonly string[]): void;
  close(): Promise<void>;
}

export async function startSpeechServer(): Promise<SpeechServer> {
  const missing = missingSpeechTools();
  if (missing.length > 0) throw new Error(`the speech test server needs ${missing.join(', ')} (apt-get install flite pocketsphinx pocketsphinx-en-us)`);
  const events = new EventEmitter();
  const speechRequests: SpeechRecord[] = [];
  const transcriptions: TranscriptionRecord[] = [];
  let phrases = new Map<string, string>(); // normalized -> as registered
  let stallAfter: number | null = null;

  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (err instanceof BadRequest) sendError(res, { status: err.status, type: 'invalid_request_error', message: err.message, param: err.param, code: err.code });
      else if (!res.headersSent) sendError(res, { status: 500, type: 'server_error', message: `speech server failed: ${String(err)}` });
      else res.destroy();
    });
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path !== '/v1/audio/speech' && path !== '/v1/audio/transcriptions') {
      sendError(res, { status: 404, type: 'invalid_request_error', message: `Invalid URL (${req.method} ${path})` });
      return;
    }
    if (req.method !== 'POST') {
      sendError(res, { status: 405, type: 'invalid_request_error', message: `Method ${req.method} is not allowed on ${path}` });
      return;
    }
    if (path === '/v1/audio/speech') await speech(req, res);
    else await transcription(req, res);
  }

  async function speech(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      throw new BadRequest('We could not parse the JSON body of your request.', null);
    }
    if (!isRecord(body)) throw new BadRequest('The request body must be a JSON object.', null);
    const model = requiredString(body, 'model');
    const input = requiredString(body, 'input');
    const voice = requiredString(body, 'voice');
    if (input.length > MAX_INPUT_CHARS) throw new BadRequest(`'input' is longer than ${MAX_INPUT_CHARS} characters.`, 'input', 'string_above_max_length');
    const format = body.response_format ?? 'mp3';
    if (format !== 'pcm' && format !== 'wav') throw new BadRequest(`This server speaks response_format 'pcm' or 'wav', not ${JSON.stringify(format)}.`, 'response_format');
    const instructions = body.instructions;
    if (instructions !== undefined && typeof instructions !== 'string') throw new BadRequest("'instructions' must be a string.", 'instructions');
    speechRequests.push({ model, input, voice, responseFormat: format, instructions });

    const pcm = await synthesize(input, FLITE_VOICES.has(voice) ? voice : 'slt');
    res.writeHead(200, { 'content-type': format === 'pcm' ? 'audio/pcm' : 'audio/wav' }); // chunked: no length
    const audio = format === 'pcm' ? pcm : encodeWav(pcm, SPEECH_RATE);
    let completed = false;
    res.once('close', () => events.emit('speech-closed', { completed }));
    const stall = stallAfter;
    stallAfter = null;
    for (let at = 0, sent = 0; at < audio.length; at += CHUNK_BYTES, sent++) {
      if (sent === stall) return; // held open until the client leaves; closeAllConnections ends it at close()
      if (!(await write(res, audio.subarray(at, at + CHUNK_BYTES)))) return;
    }
    completed = true;
    res.end();
  }

  async function transcription(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = await readForm(req);
    if (!form.file) throw new BadRequest("You must provide a 'file' to transcribe.", 'file');
    const model = form.fields.get('model');
    if (!model) throw new BadRequest("You must provide a 'model'.", 'model');
    const format = form.fields.get('response_format') ?? 'json';
    if (format !== 'json' && format !== 'text') throw new BadRequest(`This server answers response_format 'json' or 'text', not '${format}'.`, 'response_format');
    let wav: ReturnType<typeof decodeWav>;
    try {
      wav = decodeWav(form.file);
    } catch (err) {
      throw new BadRequest(`Invalid file format: this server reads 16-bit PCM WAV only (${(err as Error).message})`, 'file', 'invalid_value');
    }
    if (phrases.size === 0) throw new Error('no phrases to recognize: call expectPhrases() first');
    const heard = await recognize(resample(wav.samples, wav.sampleRate, RECOGNIZER_RATE), [...phrases.keys()]);
    const text = phrases.get(heard) ?? heard;
    transcriptions.push({ model, sampleRate: wav.sampleRate, seconds: wav.samples.length / wav.sampleRate, text });
    if (format === 'text') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`${text}\n`);
    } else sendJson(res, 200, { text });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    speechRequests,
    transcriptions,
    events,
    stallNextSpeech(afterChunks) {
      stallAfter = afterChunks;
    },
    expectPhrases(list) {
      const words = dictionaryWords();
      const next = new Map<string, string>();
      for (const phrase of list) {
        const normal = normalize(phrase);
        const unknown = normal.split(' ').filter((w) => !words.has(w));
        if (normal === '' || unknown.length > 0) throw new Error(`cannot recognize '${phrase}': words not in the pocketsphinx dictionary: ${unknown.join(', ') || '(none)'}`);
        next.set(normal, phrase);
      }
      phrases = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

class BadRequest extends Error {
  readonly param: string | null;
  readonly code: string | null;
  readonly status: number;
  constructor(message: string, param: string | null, code: string | null = null, status = 400) {
    super(message);
    this.param = param;
    this.code = code;
    this.status = status;
  }
}

function requiredString(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (value === undefined) throw new BadRequest(`Missing required parameter: '${field}'.`, field, 'missing_required_parameter');
  if (typeof value !== 'string' || value.trim() === '') throw new BadRequest(`Invalid value for '${field}': expected a non-empty string.`, field, 'invalid_type');
  return value;
}

/**
 * flite writes a whole WAV (16 kHz for the 16k voices, 8 kHz for kal); we hand out 24 kHz PCM16.
 * It writes to a file: it cannot open /dev/stdout when that is node's stdio socket.
 */
async function synthesize(text: string, voice: string): Promise<Buffer> {
  return inTempDir('troupe-tts-', async (dir) => {
    const out = join(dir, 'line.wav');
    // Arguments go to execFile as a list: no shell ever sees the text.
    await run('flite', ['-voice', voice, '-t', text, '-o', out], { timeout: TOOL_TIMEOUT_MS });
    const wav = decodeWav(await readFile(out));
    const samples = resample(wav.samples, wav.sampleRate, SPEECH_RATE);
    return Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  });
}

async function inTempDir<T>(prefix: string, use: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Runs pocketsphinx_batch on one file: unlike pocketsphinx_continuous it never splits the audio
 * at pauses (a comma's pause would otherwise make two utterances each forced into the grammar).
 */
async function recognize(samples: Int16Array, normalizedPhrases: string[]): Promise<string> {
  return inTempDir('troupe-stt-', async (dir) => {
    await writeFile(join(dir, 'utt.wav'), encodeWav(samples, RECOGNIZER_RATE));
    await writeFile(join(dir, 'ctl'), 'utt\n');
    await writeFile(join(dir, 'g.gram'), `#JSGF V1.0;\ngrammar troupe;\npublic <phrase> = ${normalizedPhrases.join(' | ')};\n`);
    // -adcin/-adchdr 44: raw audio after encodeWav's 44-byte header, not precomputed features.
    await run('pocketsphinx_batch', [
      '-adcin', 'yes', '-adchdr', '44', '-samprate', String(RECOGNIZER_RATE),
      '-cepdir', dir, '-cepext', '.wav', '-ctl', join(dir, 'ctl'), '-hyp', join(dir, 'hyp'),
      '-jsgf', join(dir, 'g.gram'), '-hmm', ACOUSTIC_MODEL, '-dict', DICTIONARY,
    ], { maxBuffer: 16 * 1024 * 1024, timeout: TOOL_TIMEOUT_MS });
    // One line per utterance: "words words (utt -1234)".
    const line = (await readFile(join(dir, 'hyp'), 'utf8')).split('\n')[0] ?? '';
    return line.replace(/\s*\(\S+\s+-?\d+\)\s*$/, '').trim();
  });
}

/** Linear interpolation: plenty for speech a recognizer or a test's RMS check hears. */
function resample(input: Int16Array, from: number, to: number): Int16Array {
  if (from === to) return input;
  const out = new Int16Array(Math.round((input.length * to) / from));
  for (let i = 0; i < out.length; i++) {
    const pos = (i * from) / to;
    const i0 = Math.floor(pos);
    const a = input[i0] ?? 0;
    const b = input[i0 + 1] ?? a;
    out[i] = Math.round(a + (b - a) * (pos - i0));
  }
  return out;
}

function normalize(phrase: string): string {
  return phrase.toLowerCase().replace(/[^a-z' ]+/g, ' ').replace(/\s+/g, ' ').trim();
}

let dictionary: Set<string> | null = null;
function dictionaryWords(): Set<string> {
  // Lines are "word PHONES", alternates "word(2) PHONES".
  dictionary ??= new Set(readFileSync(DICTIONARY, 'utf8').split('\n').map((line) => line.split(/[\s(]/, 1)[0] ?? ''));
  return dictionary;
}

async function readForm(req: IncomingMessage): Promise<{ file: Buffer | null; fields: Map<string, string> }> {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type)) throw new BadRequest('Send the audio as multipart/form-data.', null);
  const fields = new Map<string, string>();
  let file: Buffer | null = null;
  let tooLarge = false;
  await new Promise<void>((resolve, reject) => {
    const parser = busboy({ headers: req.headers, limits: { files: 1, fileSize: MAX_FILE_BYTES } });
    parser.on('field', (name, value) => fields.set(name, value));
    parser.on('file', (name, stream) => {
      if (name !== 'file') {
        stream.resume();
        return;
      }
      const parts: Buffer[] = [];
      stream.on('data', (part: Buffer) => parts.push(part));
      stream.on('limit', () => (tooLarge = true));
      stream.on('end', () => (file = Buffer.concat(parts)));
    });
    parser.on('close', () => resolve());
    parser.on('error', () => reject(new BadRequest('The multipart body is malformed.', null)));
    req.pipe(parser);
  });
  if (tooLarge) throw new BadRequest(`The file is larger than ${MAX_FILE_BYTES} bytes.`, 'file', null, 413);
  return { file, fields };
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function readable(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}
