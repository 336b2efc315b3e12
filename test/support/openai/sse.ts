// A deliberately strict reader of OpenAI-style SSE bodies. Real clients tolerate more (comments,
// CRLF, multi-line data); tests use this one to hold a server to exactly what OpenAI sends.

export interface SseBody {
  /** Each `data:` payload before [DONE], parsed. */
  chunks: unknown[];
  /** Whether the body ended with `data: [DONE]\n\n`. */
  done: boolean;
}

/** Throws on anything but `data: <json>\n\n` events, optionally closed by `data: [DONE]\n\n`. */
export function parseOpenAiSse(raw: string): SseBody {
  if (raw !== '' && !raw.endsWith('\n\n')) throw new Error(`SSE body does not end with a blank line: ${JSON.stringify(raw.slice(-80))}`);
  const events = raw === '' ? [] : raw.slice(0, -2).split('\n\n');
  const chunks: unknown[] = [];
  let done = false;
  for (const [i, event] of events.entries()) {
    if (done) throw new Error(`event after [DONE]: ${JSON.stringify(event)}`);
    if (!event.startsWith('data: ') || event.includes('\n')) throw new Error(`event ${i} is not a single data line: ${JSON.stringify(event)}`);
    const data = event.slice('data: '.length);
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    try {
      chunks.push(JSON.parse(data));
    } catch {
      throw new Error(`event ${i} is not JSON: ${JSON.stringify(data)}`);
    }
  }
  return { chunks, done };
}
