-- document_terms loses its foreign key: checked per row, it cost a third of filling the index
-- (about 18 term rows per chunk). A deleted document's term rows (a delete of its own, or
-- cascaded from its character or project) are removed by this trigger instead. The chunk rows,
-- written by the same statement as a block's term rows, keep their key: a document deleted while
-- it is processed still fails that statement or waits for it.
ALTER TABLE "document_terms" DROP CONSTRAINT "document_terms_document_id_documents_id_fk";
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "document_terms_of_deleted"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM document_terms t USING deleted d WHERE t.document_id = d.id;
	RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "documents_delete_terms" AFTER DELETE ON "documents"
	REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION "document_terms_of_deleted"();
