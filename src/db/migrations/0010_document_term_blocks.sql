-- Word counts per document become chunk sets per block of 1,024 chunks, which full-text search
-- ranks from without reading chunk rows; the stored tsvector and its GIN index go (nothing
-- reads them any more, and every chunk written had to maintain them).
DROP TABLE "document_terms";--> statement-breakpoint
CREATE TABLE "document_terms" (
	"document_id" text NOT NULL,
	"term" text NOT NULL,
	"block" integer NOT NULL,
	"chunks" integer NOT NULL,
	"members" smallint[],
	"bits" bit(1024),
	CONSTRAINT "document_terms_document_id_term_block_pk" PRIMARY KEY("document_id","term","block")
);
--> statement-breakpoint
ALTER TABLE "document_terms" ADD CONSTRAINT "document_terms_document_id_documents_id_fk" FOREIGN KEY ("document_id") REFERENCES "public"."documents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- The sets of documents indexed before this migration, as src/retrieval/full-text-search.ts
-- writes them (a list up to 48 chunks of the block, a bitmap above).
INSERT INTO "document_terms" ("document_id", "term", "block", "chunks", "members", "bits")
SELECT c."document_id", t.lexeme, c."ordinal" >> 10, count(*)::int,
	CASE WHEN count(*) <= 48 THEN array_agg((c."ordinal" & 1023)::int2 ORDER BY c."ordinal") END,
	CASE WHEN count(*) > 48 THEN bit_or(B'1'::bit(1024) >> (c."ordinal" & 1023)) END
FROM "document_chunks" c, unnest(c."tsv") AS t
GROUP BY c."document_id", t.lexeme, c."ordinal" >> 10;--> statement-breakpoint
DROP INDEX "document_chunks_tsv_idx";--> statement-breakpoint
ALTER TABLE "document_chunks" DROP COLUMN "tsv";
