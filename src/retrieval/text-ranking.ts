/**
 * The full-text ranking, defined so that its exact top results can be found from the indexes
 * without scoring every chunk a common word matches.
 *
 * A chunk's score is the sum of the weights of the query's terms it holds, a term weighing
 * ln(1 + N / df) where N is the character's ready chunks and df those holding the term (both
 * from `document_terms`); equal scores are ordered by chunk id. Terms are taken rarest first:
 * "rare" ones while their document frequencies add up to at most RARE_CHUNKS_BUDGET (every chunk
 * holding one is scored), then at most MAX_COMMON_TERMS "common" ones (for which only the first
 * chunks by id of each combination are read, see `commonLevels`); further terms are left out.
 */

/** Chunks scored one by one at most (the summed document frequencies of the rare terms). */
export const RARE_CHUNKS_BUDGET = 1_000;
/** Common terms kept: their 2^n - 1 combinations are each one ordered index walk. */
export const MAX_COMMON_TERMS = 3;

export interface TermStats {
  term: string;
  /** The character's ready chunks holding the term. */
  df: number;
}

export interface RankedTerm extends TermStats {
  weight: number;
  rare: boolean;
}

export interface TextPlan {
  /** Rare terms first, then common ones; a chunk's match mask has bit i for terms[i]. */
  terms: RankedTerm[];
}

/** Chooses and weighs the terms of a query; `chunks` is the character's ready chunk count. */
export function planText(stats: readonly TermStats[], chunks: number, rareChunksBudget = RARE_CHUNKS_BUDGET): TextPlan {
  const present = stats.filter((s) => s.df > 0).sort((a, b) => a.df - b.df || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0));
  // The document counts can lag a chunk count of 0 (documents made outside the processor).
  const n = Math.max(chunks, ...present.map((s) => s.df));
  const terms: RankedTerm[] = [];
  let budget = rareChunksBudget;
  let common = 0;
  for (const s of present) {
    const rare = common === 0 && s.df <= budget;
    if (rare) budget -= s.df;
    else if (++common > MAX_COMMON_TERMS) break;
    terms.push({ ...s, weight: Math.log(1 + n / s.df), rare });
  }
  return { terms };
}

/** The score of a chunk holding the terms of `mask`, summed in plan order (the same floats every time). */
export function scoreOf(plan: TextPlan, mask: number): number {
  let score = 0;
  plan.terms.forEach((t, i) => {
    if (mask & (1 << i)) score += t.weight;
  });
  return score;
}

/**
 * Chunks without a rare term, grouped by the common terms they hold: each level is a score and
 * the masks (combinations of common terms) that give it, best first. Reading each level's first
 * chunks by id, until enough are read, finds exactly the best of them.
 */
export function commonLevels(plan: TextPlan): { score: number; masks: number[] }[] {
  const first = plan.terms.findIndex((t) => !t.rare);
  if (first < 0) return [];
  const levels = new Map<number, number[]>();
  for (let combo = 1; combo < 1 << (plan.terms.length - first); combo++) {
    const mask = combo << first;
    const score = scoreOf(plan, mask);
    const level = levels.get(score);
    if (level) level.push(mask);
    else levels.set(score, [mask]);
  }
  return [...levels.entries()].sort((a, b) => b[0] - a[0]).map(([score, masks]) => ({ score, masks }));
}

/** Orders scored chunks as the ranking does: score descending, then id. */
export function byRank(a: { id: string; score: number }, b: { id: string; score: number }): number {
  return b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
