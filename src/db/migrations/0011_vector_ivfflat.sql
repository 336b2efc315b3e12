-- Vector search moves from HNSW over vector(N) to IVFFlat over halfvec(N), which startup makes
-- and retrains as chunks grow (src/retrieval/pgvector-setup.ts): HNSW's graph insert capped
-- filling at about 300 chunks/s. The HNSW indexes startup made before go; none was in a migration.
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_am am ON am.oid = c.relam
		WHERE i.indrelid = 'document_chunks'::regclass AND am.amname = 'hnsw' AND c.relname LIKE 'document_chunks_embedding_%'
	LOOP
		EXECUTE format('DROP INDEX %I', r.relname);
	END LOOP;
END $$;
--> statement-breakpoint
-- The IVFFlat search in one round trip: probes and the iterative scan are set for the statement
-- here, not by a transaction around it (three more round trips, 3-6 ms on a loaded machine).
-- plpgsql leaves the types unchecked until a call, so this is made with or without pgvector.
CREATE OR REPLACE FUNCTION "document_chunks_nearest"(dims int, query text, project text, owner text, not_ready text[], lim int, probes int)
RETURNS TABLE (id text) LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('ivfflat.iterative_scan', 'relaxed_order', true), set_config('ivfflat.probes', probes::text, true);
	-- The expression matches the partial index's (src/retrieval/pgvector-setup.ts); relaxed order
	-- is put right by the outer sort.
	RETURN QUERY EXECUTE format(
		'SELECT h.id FROM (SELECT c.id, c.embedding::halfvec(%1$s) <=> $1::halfvec(%1$s) AS distance FROM document_chunks c
		WHERE c.embedding_dims = %1$s AND c.project_id = $2 AND c.character_id = $3 AND c.document_id <> ALL ($4)
		ORDER BY distance LIMIT $5) h ORDER BY h.distance, h.id', dims)
	USING query, project, owner, not_ready, lim;
END $$;
