CREATE TABLE "room_participants" (
	"id" text PRIMARY KEY NOT NULL,
	"room_id" text NOT NULL,
	"character_id" text NOT NULL,
	"conversation_id" text NOT NULL,
	"rtc_identity" text NOT NULL,
	"dispatch_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"left_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "room_transcript_entries" (
	"id" text PRIMARY KEY NOT NULL,
	"room_id" text NOT NULL,
	"seq" integer NOT NULL,
	"speaker_type" text NOT NULL,
	"character_id" text,
	"speaker_name" text,
	"content" text NOT NULL,
	"client_key" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "rooms" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"mode" text DEFAULT 'freeform' NOT NULL,
	"scene_prompt" text,
	"last_seq" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"ended_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "room_participants" ADD CONSTRAINT "room_participants_room_id_rooms_id_fk" FOREIGN KEY ("room_id") REFERENCES "public"."rooms"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "room_participants" ADD CONSTRAINT "room_participants_character_id_characters_id_fk" FOREIGN KEY ("character_id") REFERENCES "public"."characters"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "room_participants" ADD CONSTRAINT "room_participants_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."conversations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "room_transcript_entries" ADD CONSTRAINT "room_transcript_entries_room_id_rooms_id_fk" FOREIGN KEY ("room_id") REFERENCES "public"."rooms"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "room_transcript_entries" ADD CONSTRAINT "room_transcript_entries_character_id_characters_id_fk" FOREIGN KEY ("character_id") REFERENCES "public"."characters"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "rooms" ADD CONSTRAINT "rooms_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "room_participants_room_idx" ON "room_participants" USING btree ("room_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "room_participants_active_idx" ON "room_participants" USING btree ("room_id","character_id") WHERE "room_participants"."left_at" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "room_transcript_entries_room_seq_idx" ON "room_transcript_entries" USING btree ("room_id","seq");--> statement-breakpoint
CREATE UNIQUE INDEX "room_transcript_entries_room_client_key_idx" ON "room_transcript_entries" USING btree ("room_id","client_key");--> statement-breakpoint
CREATE INDEX "rooms_project_idx" ON "rooms" USING btree ("project_id","id");--> statement-breakpoint
CREATE INDEX "rooms_project_active_idx" ON "rooms" USING btree ("project_id","id") WHERE "rooms"."ended_at" is null;