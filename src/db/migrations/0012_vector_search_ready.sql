-- Vector search finds the character's ready documents itself, so it can run beside the full-text
-- lookup instead of after it (src/retrieval/vector-search.ts), and returns where each chunk is
-- (document, ordinal), the key fusion and the final row fetch use. Up to `exact_up_to` ready
-- chunks it compares every one of the character's chunks exactly (the expression differs from
-- the index's, so the planner cannot use it); above, the IVFFlat index with probes and
-- pgvector 0.8's iterative scan, set for this statement only.
DROP FUNCTION IF EXISTS "document_chunks_nearest"(int, text, text, text, text[], int, int);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "document_chunks_nearest_ready"(dims int, query text, project text, owner text, lim int, probes int, exact_up_to bigint)
RETURNS TABLE (id text, document_id text, ordinal int) LANGUAGE plpgsql AS $$
DECLARE
	not_ready text[];
	ready_chunks bigint;
BEGIN
	SELECT coalesce(array_agg(d.id) FILTER (WHERE d.status <> 'ready'), '{}'), coalesce(sum(d.chunk_count) FILTER (WHERE d.status = 'ready'), 0)
	INTO not_ready, ready_chunks
	FROM documents d WHERE d.project_id = project AND d.character_id = owner;
	IF ready_chunks <= exact_up_to THEN
		RETURN QUERY EXECUTE format(
			'SELECT c.id, c.document_id, c.ordinal FROM document_chunks c
			WHERE c.embedding_dims = %1$s AND c.project_id = $2 AND c.character_id = $3 AND c.document_id <> ALL ($4)
			ORDER BY c.embedding <=> $1::vector, c.id LIMIT $5', dims)
		USING query, project, owner, not_ready, lim;
		RETURN;
	END IF;
	PERFORM set_config('ivfflat.iterative_scan', 'relaxed_order', true), set_config('ivfflat.probes', probes::text, true);
	-- The expression matches the partial index's (src/retrieval/pgvector-setup.ts); relaxed order
	-- is put right by the outer sort.
	RETURN QUERY EXECUTE format(
		'SELECT h.id, h.document_id, h.ordinal FROM (SELECT c.id, c.document_id, c.ordinal, c.embedding::halfvec(%1$s) <=> $1::halfvec(%1$s) AS distance
		FROM document_chunks c
		WHERE c.embedding_dims = %1$s AND c.project_id = $2 AND c.character_id = $3 AND c.document_id <> ALL ($4)
		ORDER BY distance LIMIT $5) h ORDER BY h.distance, h.id', dims)
	USING query, project, owner, not_ready, lim;
END $$;
