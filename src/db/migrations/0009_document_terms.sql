CREATE TABLE "document_terms" (
	"document_id" text NOT NULL,
	"term" text NOT NULL,
	"chunks" integer NOT NULL,
	CONSTRAINT "document_terms_document_id_term_pk" PRIMARY KEY("document_id","term")
);
--> statement-breakpoint
DROP INDEX "document_chunks_character_idx";--> statement-breakpoint
ALTER TABLE "document_terms" ADD CONSTRAINT "document_terms_document_id_documents_id_fk" FOREIGN KEY ("document_id") REFERENCES "public"."documents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "document_chunks_character_idx" ON "document_chunks" USING btree ("character_id","id");--> statement-breakpoint
-- Documents indexed before this migration get their word counts from their chunks.
INSERT INTO "document_terms" ("document_id", "term", "chunks")
SELECT c."document_id", t.lexeme, count(*)::int
FROM "document_chunks" c, unnest(c."tsv") AS t
GROUP BY c."document_id", t.lexeme;
