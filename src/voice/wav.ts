import { TroupeError } from '../errors.ts';

/**
 * Just enough RIFF/WAVE for 16-bit PCM: speech servers take a file upload, not raw samples,
 * and WAV is the one container every OpenAI-compatible transcription server accepts.
 */

const HEADER_BYTES = 44;
const PCM = 1;
const EXTENSIBLE = 0xfffe;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** PCM16 samples as little-endian bytes (WAV's byte order), without copying on little-endian hosts. */
export function pcm16Bytes(pcm: Int16Array | Buffer): Buffer {
  if (Buffer.isBuffer(pcm)) return pcm;
  if (LITTLE_ENDIAN) return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const out = Buffer.alloc(pcm.length * 2);
  pcm.forEach((s, i) => out.writeInt16LE(s, i * 2));
  return out;
}

/** A canonical 44-byte-header WAV file around 16-bit little-endian PCM. */
export function encodeWav(pcm: Int16Array | Buffer, sampleRate: number, channels = 1): Buffer {
  const data = pcm16Bytes(pcm);
  if (data.length % 2 !== 0) throw new TroupeError('invalid_request', 'PCM16 audio must have an even number of bytes.');
  const header = Buffer.alloc(HEADER_BYTES);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(PCM, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * channels * 2, 28);
  header.writeUInt16LE(channels * 2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

export interface DecodedWav {
  sampleRate: number;
  /** Channels averaged into one. */
  samples: Int16Array;
}

/** Reads a 16-bit PCM WAV (any chunk order, extra chunks skipped) and mixes it down to mono. */
export function decodeWav(file: Buffer): DecodedWav {
  if (file.length < 12 || file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') {
    throw invalid('not a RIFF/WAVE file');
  }
  let format: { channels: number; sampleRate: number } | null = null;
  for (let at = 12; at + 8 <= file.length; ) {
    const id = file.toString('ascii', at, at + 4);
    // Streaming writers leave the size at 0 or 0xFFFFFFFF; the data then runs to the end.
    const declared = file.readUInt32LE(at + 4);
    const size = Math.min(declared === 0 && id === 'data' ? Infinity : declared, file.length - at - 8);
    const body = file.subarray(at + 8, at + 8 + size);
    if (id === 'fmt ') {
      if (body.length < 16) throw invalid('its fmt chunk is truncated');
      const tag = body.readUInt16LE(0);
      const bits = body.readUInt16LE(14);
      if ((tag !== PCM && tag !== EXTENSIBLE) || bits !== 16) throw invalid(`only 16-bit PCM is supported (format ${tag}, ${bits} bits)`);
      format = { channels: body.readUInt16LE(2), sampleRate: body.readUInt32LE(4) };
      if (format.channels < 1 || format.sampleRate < 1) throw invalid('its fmt chunk declares no channels or no sample rate');
    } else if (id === 'data') {
      if (!format) throw invalid('its data chunk comes before the fmt chunk');
      return { sampleRate: format.sampleRate, samples: mixDown(body, format.channels) };
    }
    at += 8 + size + (size % 2); // chunks are padded to even sizes
  }
  throw invalid('it has no data chunk');
}

function mixDown(data: Buffer, channels: number): Int16Array {
  const frames = Math.floor(data.length / (2 * channels));
  const out = new Int16Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += data.readInt16LE((f * channels + c) * 2);
    out[f] = Math.round(sum / channels);
  }
  return out;
}

function invalid(why: string): TroupeError {
  return new TroupeError('invalid_request', `The audio file could not be read: ${why}.`, { detailCode: 'invalid_audio' });
}
