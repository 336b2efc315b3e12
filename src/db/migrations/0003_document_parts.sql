CREATE TABLE "document_parts" (
	"document_id" text NOT NULL,
	"part" integer NOT NULL,
	"bytes" "bytea" NOT NULL,
	CONSTRAINT "document_parts_document_id_part_pk" PRIMARY KEY("document_id","part")
);
--> statement-breakpoint
ALTER TABLE "document_parts" ADD CONSTRAINT "document_parts_document_id_documents_id_fk" FOREIGN KEY ("document_id") REFERENCES "public"."documents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Originals stored before this migration become their document's only part.
INSERT INTO "document_parts" ("document_id", "part", "bytes") SELECT "id", 0, "content" FROM "documents";--> statement-breakpoint
ALTER TABLE "documents" DROP COLUMN "content";
