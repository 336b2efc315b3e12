ALTER TABLE "messages" ADD COLUMN "client_key" text;--> statement-breakpoint
CREATE UNIQUE INDEX "messages_conversation_client_key_idx" ON "messages" USING btree ("conversation_id","client_key");