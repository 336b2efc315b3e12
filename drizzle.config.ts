import { defineConfig } from 'drizzle-kit';

// Migrations are generated offline from the schema and applied by the service at startup.
export default defineConfig({
  dialect: 'postgresql',
  schema: ['./src/db/schema.ts', './src/db/room-schema.ts'],
  out: './src/db/migrations',
});
