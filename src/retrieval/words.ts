/**
 * The one tokenizer of full-text search: chunks are indexed by it (document_terms) and queries
 * split by it, so every word a query asks for is a word a chunk can hold. A word is a run of
 * letters, combining marks and digits, lower-cased: "e-mail" is "e" and "mail", "foo.com" is
 * "foo" and "com", and a vowel sign of an Indic script stays inside its word. Words longer than
 * MAX_WORD_LENGTH are left out (a base64 blob or a run of digits says nothing a search asks for,
 * and a key row must fit a btree page).
 *
 * It runs in JavaScript rather than as `to_tsvector` in the database: PostgreSQL's parser took
 * about 0.1 ms for a 1,500-character chunk, two fifths of writing a block of chunks.
 */
const WORD = /[\p{L}\p{M}\p{N}]+/gu;

/** In UTF-16 code units, so at most 600 bytes of UTF-8. */
export const MAX_WORD_LENGTH = 200;

/** The text's words in order, repeats kept. */
export function wordsOf(text: string): string[] {
  const words = text.toLowerCase().match(WORD) ?? [];
  return words.some((word) => word.length > MAX_WORD_LENGTH) ? words.filter((word) => word.length <= MAX_WORD_LENGTH) : words;
}
