CREATE TABLE "responses" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"model" text NOT NULL,
	"input" jsonb NOT NULL,
	"history" jsonb NOT NULL,
	"output" jsonb NOT NULL,
	"response" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "responses" ADD CONSTRAINT "responses_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "responses_project_idx" ON "responses" USING btree ("project_id","id");