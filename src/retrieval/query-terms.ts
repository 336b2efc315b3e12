import { wordsOf } from './words.ts';

/**
 * Words that say nothing about which passage is meant. Full-text search keeps every word of a
 * chunk (words.ts, for any language), so a query of "what is the…" would
 * match nearly every chunk and rank them all; these are left out of queries instead.
 */
const STOPWORDS = new Set(
  (
    'a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it its ' +
    'me my no not of on or our she so than that the their them then there these they this those to us was we were what ' +
    'when where which who whom why will with would you your yours about after again all also any because before being ' +
    'between both each few more most other over same should some such through too under until very just now here ' +
    'tell know please said say says'
  ).split(' '),
);

/** At most this many terms: a long message keeps its longest (usually most specific) words. */
const MAX_TERMS = 12;

/** The words (words.ts) of a player's message worth searching for, without repeats. */
export function queryTerms(text: string): string[] {
  const words = wordsOf(text).filter((w) => w.length > 1 && !STOPWORDS.has(w));
  const unique = [...new Set(words)];
  if (unique.length <= MAX_TERMS) return unique;
  return unique.sort((a, b) => b.length - a.length).slice(0, MAX_TERMS);
}
