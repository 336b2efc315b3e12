// Types shared by the upload sniffing, the parser pool, the chunker and the index (issue 5).
export const DOCUMENT_MIME_TYPES = [
  'application/pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'text/plain', 'text/markdown', 'text/html',
  'image/png', 'image/jpeg', 'image/webp',
] as const;
export type DocumentMimeType = (typeof DOCUMENT_MIME_TYPES)[number];

/** A run of text with where it came from. */
export interface TextSection {
  text: string;
  /** 1-based page (PDF); null where the format has no pages. */
  page: number | null;
  /** Enclosing headings, outermost first (Markdown, HTML, DOCX headings). */
  headingPath: string[];
}

export interface ParseLimits {
  maxPages: number;             // PDF pages read
  maxPixels: number;            // image width*height, read from the header before decoding
  maxUncompressedBytes: number; // DOCX: sum of zip entries' uncompressed sizes, from the central directory
  maxZipEntries: number;
  maxTextChars: number;         // extracted text kept
}

export type ParseResult =
  | { ok: true; sections: TextSection[]; pages: number | null }
  | { ok: false; error: string }; // words a user can act on, e.g. "The PDF has 900 pages; at most 500 are read."
