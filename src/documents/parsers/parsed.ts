// What each format parser hands back to the worker task, and the one place where that becomes a
// ParseResult (so the "no text" rule is the same for every format).
import type { ParseResult, TextSection } from '../types.ts';

export interface Extracted {
  sections: TextSection[];
  pages?: number;
}

export function toParseResult(extracted: Extracted, emptyMessage: string): ParseResult {
  if (extracted.sections.length === 0) return { ok: false, error: emptyMessage };
  return { ok: true, sections: extracted.sections, pages: extracted.pages ?? null };
}
