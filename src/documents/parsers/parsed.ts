// What each format parser hands back to the worker task, and the one place where that becomes a
// ParseResult (so the "no text" rule is the same for every format).
import type { ParseResult, TextSection } from '../types.ts';

export interface Extracted {
  sections: TextSection[];
  pages?: number;
}

export function toParseResult(extracted: Extracted, emptyMessage: string): ParseResult {
  if (extracted.sections.length === 0) return { ok: false, error: emptyMessage };
  const sections = extracted.sections.map((s) => ({ ...s, text: storable(s.text), headingPath: s.headingPath.map(storable) }));
  return { ok: true, sections, pages: extracted.pages ?? null };
}

/**
 * What a parser extracts is not what the user typed: a PDF font whose map sends a glyph to
 * U+0000 (pdf.js hands it on), or half a surrogate pair from any parser, would put text in a
 * chunk that PostgreSQL refuses, and the document would fail whole. Such characters become
 * U+FFFD, as HTML's own parser makes them, and the rest of the document is kept.
 */
function storable(text: string): string {
  const withoutNul = text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
  return withoutNul.isWellFormed() ? withoutNul : withoutNul.toWellFormed();
}
