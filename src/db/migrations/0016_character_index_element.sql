ALTER TABLE "character_vector_indexes" ADD COLUMN "element" text DEFAULT 'halfvec' NOT NULL;--> statement-breakpoint
-- As in 0015, but a character index over `vector` (float32, built on PGlite: pgvector compares
-- float32 about twice as fast as halfvec there, with no F16C in WebAssembly) is searched with its
-- own expression, which the planner must see to take it.
CREATE OR REPLACE FUNCTION "document_chunks_nearest_ready"(dims int, query text, project text, owner text, lim int, probes int, exact_up_to bigint)
RETURNS TABLE (id text, document_id text, ordinal int) LANGUAGE plpgsql AS $$
DECLARE
	not_ready text[];
	ready_chunks bigint;
	own_probes int;
	element text := 'halfvec';
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
	SELECT i.probes, i.element INTO own_probes, element FROM character_vector_indexes i WHERE i.character_id = owner AND i.dimensions = dims;
	PERFORM set_config('ivfflat.iterative_scan', 'relaxed_order', true), set_config('ivfflat.probes', coalesce(own_probes, probes)::text, true);
	-- The expression matches the indexes' (src/retrieval/pgvector-setup.ts, character-vector-index.ts);
	-- relaxed order is put right by the outer sort.
	RETURN QUERY EXECUTE format(
		'SELECT h.id, h.document_id, h.ordinal FROM (SELECT c.id, c.document_id, c.ordinal, c.embedding::%2$s(%1$s) <=> $1::%2$s(%1$s) AS distance
		FROM document_chunks c
		WHERE c.embedding_dims = %1$s AND c.project_id = $2 AND c.character_id = $3 AND c.document_id <> ALL ($4)
		ORDER BY distance LIMIT $5) h ORDER BY h.distance, h.id', dims, CASE WHEN element = 'vector' THEN 'vector' ELSE 'halfvec' END)
	USING query, project, owner, not_ready, lim;
END $$;
