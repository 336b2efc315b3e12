import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.ts';
import { rowsOf } from './pgvector-setup.ts';
import { byRank, commonLevels, planText, scoreOf, type TermStats, type TextPlan } from './text-ranking.ts';

export interface SearchScope {
  projectId: string;
  characterId: string;
  /** The character's documents that are not `ready` (reprocessing keeps old chunks until replaced). */
  notReady: string[];
}

/**
 * The chunks a search may return: the character's, in `ready` documents. The few documents
 * that are not ready are named, so each chunk is checked without a join the planner could
 * turn into a scan of every ready document's chunks.
 */
export function scopeOf(scope: SearchScope, walk = false): SQL {
  // For a walk in id order, a range (not `=`) keeps character_id out of the planner's
  // constants, so `order by character_id, id` can only come from the (character_id, id) index:
  // a walk over this character's chunks alone, not the primary key's through everyone's.
  const character = walk
    ? sql`c.character_id between ${scope.characterId} and ${scope.characterId}`
    : sql`c.character_id = ${scope.characterId}`;
  const owner = sql`c.project_id = ${scope.projectId} and ${character}`;
  if (scope.notReady.length === 0) return owner;
  return sql`${owner} and c.document_id not in (${sql.join(scope.notReady.map((id) => sql`${id}`), sql`, `)})`;
}

/**
 * The query's lexemes (as the `simple` configuration makes them from the chunks) with their
 * document frequencies, and the character's ready chunks: one round trip, a few index lookups.
 */
export async function termStats(
  db: Executor,
  owner: { projectId: string; characterId: string },
  words: string,
): Promise<{ stats: TermStats[]; chunks: number; scope: SearchScope }> {
  const rows = rowsOf<{ term: string | null; df: number | string; chunks: number | string; not_ready: string[] | string | null }>(
    await db.execute(sql`
      with owned as (
        select id, status, chunk_count from documents where project_id = ${owner.projectId} and character_id = ${owner.characterId}
      ), terms as (select distinct t.lexeme as term from unnest(to_tsvector('simple', ${words})) as t)
      select terms.term,
        coalesce((select sum(dt.chunks) from owned join document_terms dt on dt.document_id = owned.id and dt.term = terms.term
                  where owned.status = 'ready'), 0) as df,
        (select coalesce(sum(chunk_count), 0) from owned where status = 'ready') as chunks,
        (select array_to_json(array_agg(id)) from owned where status <> 'ready') as not_ready
      from (select 1) as one left join terms on true`),
  );
  const first = rows[0];
  const notReady = typeof first?.not_ready === 'string' ? (JSON.parse(first.not_ready) as string[]) : (first?.not_ready ?? []);
  const stats = rows.filter((r) => r.term !== null).map((r) => ({ term: r.term as string, df: Number(r.df) }));
  return { stats, chunks: Number(first?.chunks ?? 0), scope: { ...owner, notReady } };
}

/** A tsquery matching exactly one lexeme (quoted: lexemes may hold punctuation). */
function lexemeQuery(term: string): SQL {
  return sql`${`'${term.replace(/['\\]/g, (m) => m + m)}'`}::tsquery`;
}

function anyOf(queries: SQL[]): SQL {
  return sql`(${sql.join(queries, sql` || `)})`;
}

/**
 * The exact top `limit` chunks of the full-text ranking (text-ranking.ts), best first: every
 * chunk holding a rare term, scored, and per level of common terms the first `limit` chunks by
 * id, read through the (character_id, id) index or the GIN index, whichever the planner prefers.
 */
export async function fullTextHits(
  db: Executor,
  scope: SearchScope,
  stats: TermStats[],
  chunks: number,
  limit: number,
  rareChunksBudget?: number,
): Promise<{ id: string; score: number }[]> {
  const plan = planText(stats, chunks, rareChunksBudget);
  if (plan.terms.length === 0) return [];
  const queries = plan.terms.map((t) => lexemeQuery(t.term));
  const rare = queries.filter((_, i) => plan.terms[i]?.rare);
  const where = scopeOf(scope);
  const branches: SQL[] = [];
  if (rare.length > 0) {
    // Which terms each chunk holding a rare term has, one GIN lookup per term: `tsv @@` inside
    // the index, never on the row, whose tsvector would have to be read and decompressed.
    const anyRare = anyOf(rare);
    const perTerm = queries.map((q, i) => sql`select c.id, ${1 << i}::int as bit from document_chunks c where ${where} and c.tsv @@ (${q} && ${anyRare})`);
    branches.push(sql`select id, sum(bit)::int as mask, 0 as level from (${sql.join(perTerm, sql` union all `)}) as held group by id`);
  }
  const levels = commonLevels(plan);
  levels.forEach((level, i) => {
    const condition = sql.join(level.masks.map((mask) => combo(queries, mask)), sql` || `);
    const masks = level.masks.length === 1 ? sql`${level.masks[0]}::int` : maskCase(queries, level.masks);
    branches.push(sql`(select c.id, ${masks} as mask, ${i + 1} as level from document_chunks c
      where ${scopeOf(scope, true)} and c.tsv @@ (${condition}) order by c.character_id, c.id limit ${limit})`);
  });
  const rows = rowsOf<{ id: string; mask: number; level: number }>(await db.execute(sql.join(branches, sql` union all `)));
  return pickTop(plan, rows, levels.length, limit);
}

/** A tsquery for "holds exactly the terms of `mask`" (of the plan's terms): one GIN-searchable condition. */
function combo(queries: SQL[], mask: number): SQL {
  const parts = queries.map((q, i) => (mask & (1 << i) ? q : sql`(!!${q})`));
  return sql`(${sql.join(parts, sql` && `)})`;
}

function maskCase(queries: SQL[], masks: number[]): SQL {
  const whens = masks.map((mask) => sql`when c.tsv @@ ${combo(queries, mask)} then ${mask}`);
  return sql`(case ${sql.join(whens, sql` `)} else 0 end)`;
}

/** Rare hits all count; common levels are taken best first until `limit` chunks came from them. */
function pickTop(plan: TextPlan, rows: { id: string; mask: number; level: number }[], levelCount: number, limit: number): { id: string; score: number }[] {
  const scored = rows.filter((r) => Number(r.level) === 0).map((r) => ({ id: r.id, score: scoreOf(plan, Number(r.mask)) }));
  let common = 0;
  for (let level = 1; level <= levelCount && common < limit; level++) {
    const found = rows.filter((r) => Number(r.level) === level);
    common += found.length;
    for (const r of found) scored.push({ id: r.id, score: scoreOf(plan, Number(r.mask)) });
  }
  return scored.sort(byRank).slice(0, limit);
}
