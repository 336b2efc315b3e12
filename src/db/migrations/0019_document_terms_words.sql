-- Words are now made in Troupe (src/retrieval/words.ts: runs of letters, marks and digits,
-- lower-cased, at most 200 long) for both chunks and queries, instead of by to_tsvector('simple'),
-- whose parser kept "foo.com", "3.14" or "e-mail" as words of their own that no query could
-- name. The sets already written are rebuilt from their chunks by the same rule in SQL: the same
-- words for ASCII text, and nearly the same elsewhere ([[:alnum:]] is the server's idea of a
-- letter or digit, and it leaves combining marks out); a document uploaded again gets the exact
-- rule.
TRUNCATE "document_terms";
--> statement-breakpoint
INSERT INTO "document_terms" ("character_id", "document_id", "term", "block", "chunks", "members", "bits")
SELECT g.character_id, g.document_id, g.word, g.block, g.n,
	CASE WHEN g.n <= 48 THEN g.offsets END,
	CASE WHEN g.n > 48 THEN (SELECT bit_or(B'1'::bit(1024) >> o) FROM unnest(g.offsets) AS o) END
FROM (
	SELECT w.character_id, w.document_id, w.word, w.block, count(*)::int AS n, array_agg(w.member::int2) AS offsets
	FROM (
		SELECT DISTINCT c.character_id, c.document_id, c.ordinal >> 10 AS block, c.ordinal & 1023 AS member, m[1] AS word
		FROM "document_chunks" c, regexp_matches(lower(c.content), '[[:alnum:]]+', 'g') AS m
	) w
	WHERE length(w.word) <= 200
	GROUP BY w.character_id, w.document_id, w.word, w.block
) g
ORDER BY g.character_id, g.word COLLATE "C";
