CREATE TABLE "character_vector_indexes" (
	"character_id" text NOT NULL,
	"dimensions" integer NOT NULL,
	"index_name" text NOT NULL,
	"lists" integer NOT NULL,
	"probes" integer NOT NULL,
	"chunks" integer NOT NULL,
	CONSTRAINT "character_vector_indexes_character_id_dimensions_pk" PRIMARY KEY("character_id","dimensions")
);
--> statement-breakpoint
ALTER TABLE "character_vector_indexes" ADD CONSTRAINT "character_vector_indexes_character_id_characters_id_fk" FOREIGN KEY ("character_id") REFERENCES "public"."characters"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Vector search as in 0012, but a character with an index of its own (character-vector-index.ts)
-- is searched with that index's probes: the planner takes the partial index, which holds only
-- the character's rows, over the shared one (same expression, fewer rows to probe and no other
-- character's rows to visit and skip).
CREATE OR REPLACE FUNCTION "document_chunks_nearest_ready"(dims int, query text, project text, owner text, lim int, probes int, exact_up_to bigint)
RETURNS TABLE (id text, document_id text, ordinal int) LANGUAGE plpgsql AS $$
DECLARE
	not_ready text[];
	ready_chunks bigint;
	own_probes int;
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
	SELECT i.probes INTO own_probes FROM character_vector_indexes i WHERE i.character_id = owner AND i.dimensions = dims;
	PERFORM set_config('ivfflat.iterative_scan', 'relaxed_order', true), set_config('ivfflat.probes', coalesce(own_probes, probes)::text, true);
	-- The expression matches the indexes' (src/retrieval/pgvector-setup.ts); relaxed order is put
	-- right by the outer sort.
	RETURN QUERY EXECUTE format(
		'SELECT h.id, h.document_id, h.ordinal FROM (SELECT c.id, c.document_id, c.ordinal, c.embedding::halfvec(%1$s) <=> $1::halfvec(%1$s) AS distance
		FROM document_chunks c
		WHERE c.embedding_dims = %1$s AND c.project_id = $2 AND c.character_id = $3 AND c.document_id <> ALL ($4)
		ORDER BY distance LIMIT $5) h ORDER BY h.distance, h.id', dims)
	USING query, project, owner, not_ready, lim;
END $$;
