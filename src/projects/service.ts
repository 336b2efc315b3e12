import { and, asc, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Invalidations } from '../cache/invalidations.ts';
import type { ReadCache } from '../cache/read-cache.ts';
import type { Db, Executor } from '../db/database.ts';
import { apiKeys, projects } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { newId } from '../ids.ts';
import { displayPrefix, generateApiKey, hashApiKey, looksLikeApiKey } from './api-key.ts';

export interface Project {
  id: string;
  name: string;
  createdAt: string;
}

export interface ApiKeyInfo {
  id: string;
  projectId: string;
  name: string | null;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface CreatedApiKey {
  id: string;
  key: string;
  projectId: string;
  name: string | null;
  createdAt: string;
}

/** Who is calling: resolved from the API key on every request. */
export interface Principal {
  projectId: string;
  keyId: string;
  /** A character's voice agent, allowed into one room's WebSocket only. */
  agent?: { roomId: string; characterId: string };
}

export interface Page {
  limit: number;
  after: string | undefined;
}

const DEFAULT_PROJECT = 'default';

export class ProjectService {
  readonly #db: Db;
  readonly #invalidations: Invalidations;
  readonly #principals: ReadCache<Principal>;
  readonly #secrets = new Map<string, string>();
  /** Recent keys and their hashes: hashing every request's key showed up in the profile. */
  readonly #hashes = new Map<string, string>();
  readonly #maxHashes: number;

  constructor(options: { db: Db; invalidations: Invalidations; cacheMaxEntries: number }) {
    this.#db = options.db;
    this.#invalidations = options.invalidations;
    this.#maxHashes = options.cacheMaxEntries;
    this.#principals = this.#invalidations.cache('apiKey', {
      maxEntries: options.cacheMaxEntries,
      load: (hash) => this.#loadPrincipal(hash),
    });
  }

  async createProject(name: string): Promise<Project> {
    const [row] = await this.#db.insert(projects).values({ id: newId('project'), name }).returning();
    if (!row) throw new Error('insert returned no row');
    return toProject(row);
  }

  async getProject(id: string): Promise<Project> {
    const [row] = await this.#db.select().from(projects).where(eq(projects.id, id));
    if (!row) throw notFound('project', id);
    return toProject(row);
  }

  /** The secret that signs this project's capability webhooks (it never changes, so it is cached). */
  async webhookSecret(projectId: string): Promise<string> {
    const cached = this.#secrets.get(projectId);
    if (cached) return cached;
    const [row] = await this.#db.select({ secret: projects.webhookSecret }).from(projects).where(eq(projects.id, projectId));
    if (!row) throw notFound('project', projectId);
    this.#secrets.set(projectId, row.secret);
    return row.secret;
  }

  async listProjects(page: Page): Promise<Project[]> {
    const rows = await this.#db
      .select()
      .from(projects)
      .where(page.after ? gt(projects.id, page.after) : undefined)
      .orderBy(asc(projects.id))
      .limit(page.limit);
    return rows.map(toProject);
  }

  async createKey(projectId: string, name: string | null, key: string = generateApiKey()): Promise<CreatedApiKey> {
    await this.getProject(projectId);
    return insertKey(this.#db, projectId, name, key);
  }

  async listKeys(projectId: string, page: Page): Promise<ApiKeyInfo[]> {
    await this.getProject(projectId);
    const rows = await this.#db
      .select()
      .from(apiKeys)
      .where(and(eq(apiKeys.projectId, projectId), page.after ? gt(apiKeys.id, page.after) : undefined))
      .orderBy(asc(apiKeys.id))
      .limit(page.limit);
    return rows.map(toKeyInfo);
  }

  /** Revocation takes effect at once in every process (cache invalidated through NOTIFY). */
  async revokeKey(keyId: string): Promise<ApiKeyInfo> {
    const row = await this.#db.transaction(async (tx) => {
      const [existing] = await tx.select().from(apiKeys).where(eq(apiKeys.id, keyId)).for('update');
      if (!existing) throw notFound('api_key', keyId);
      if (existing.revokedAt) return existing;
      const [updated] = await tx.update(apiKeys).set({ revokedAt: new Date() }).where(eq(apiKeys.id, keyId)).returning();
      await this.#invalidations.publish(tx, 'apiKey', [existing.keyHash]);
      return updated ?? existing;
    });
    this.#invalidations.applyLocal('apiKey', [row.keyHash]);
    return toKeyInfo(row);
  }

  /** Resolves a presented key to its project, or null when it is unknown or revoked. */
  /** A promise only when the key is not cached: every authenticated request comes through here. */
  authenticate(key: string): Principal | null | Promise<Principal | null> {
    if (!looksLikeApiKey(key)) return null;
    let hash = this.#hashes.get(key);
    if (hash === undefined) {
      hash = hashApiKey(key);
      if (this.#hashes.size >= this.#maxHashes) {
        const oldest = this.#hashes.keys().next();
        if (!oldest.done) this.#hashes.delete(oldest.value);
      }
      if (this.#maxHashes > 0) this.#hashes.set(key, hash);
    }
    return this.#principals.peek(hash) ?? this.#principals.get(hash).then(orNull);
  }

  async #loadPrincipal(hash: string): Promise<Principal | undefined> {
    const [row] = await this.#db
      .select({ projectId: apiKeys.projectId, keyId: apiKeys.id })
      .from(apiKeys)
      .where(and(eq(apiKeys.keyHash, hash), isNull(apiKeys.revokedAt)));
    return row;
  }

  /**
   * Startup: with TROUPE_BOOTSTRAP_KEY, make sure project `default` holds it. Without one, and
   * when no key exists at all, create a first key and return it so it can be shown once.
   */
  async ensureInitialKey(bootstrapKey: string | undefined): Promise<{ created: CreatedApiKey | null; revokedBootstrap: boolean }> {
    // Processes starting together on one database must not both create `default` or the key:
    // a transaction-scoped advisory lock makes them take turns.
    return this.#db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(${INITIAL_KEY_LOCK})`);
      if (bootstrapKey) {
        const [existing] = await tx.select().from(apiKeys).where(eq(apiKeys.keyHash, hashApiKey(bootstrapKey)));
        if (existing) return { created: null, revokedBootstrap: existing.revokedAt !== null };
        const project = await defaultProject(tx);
        await insertKey(tx, project.id, 'bootstrap', bootstrapKey);
        return { created: null, revokedBootstrap: false };
      }
      const [anyKey] = await tx.select({ id: apiKeys.id }).from(apiKeys).limit(1);
      if (anyKey) return { created: null, revokedBootstrap: false };
      const project = await defaultProject(tx);
      return { created: await insertKey(tx, project.id, 'first key', generateApiKey()), revokedBootstrap: false };
    });
  }
}

/** Any number that no other advisory lock of Troupe uses. */
const INITIAL_KEY_LOCK = 7_214_003;

async function defaultProject(db: Executor): Promise<Project> {
  const [row] = await db.select().from(projects).where(eq(projects.name, DEFAULT_PROJECT)).orderBy(asc(projects.id)).limit(1);
  if (row) return toProject(row);
  const [created] = await db.insert(projects).values({ id: newId('project'), name: DEFAULT_PROJECT }).returning();
  if (!created) throw new Error('insert returned no row');
  return toProject(created);
}

async function insertKey(db: Executor, projectId: string, name: string | null, key: string): Promise<CreatedApiKey> {
  const [row] = await db
    .insert(apiKeys)
    .values({ id: newId('apiKey'), projectId, name, keyHash: hashApiKey(key), keyPrefix: displayPrefix(key) })
    .returning();
  if (!row) throw new Error('insert returned no row');
  return { id: row.id, key, projectId, name: row.name, createdAt: row.createdAt.toISOString() };
}

function toProject(row: typeof projects.$inferSelect): Project {
  return { id: row.id, name: row.name, createdAt: row.createdAt.toISOString() };
}

function toKeyInfo(row: typeof apiKeys.$inferSelect): ApiKeyInfo {
  return {
    id: row.id,
    projectId: row.projectId,
    name: row.name,
    prefix: row.keyPrefix,
    createdAt: row.createdAt.toISOString(),
    revokedAt: row.revokedAt ? row.revokedAt.toISOString() : null,
  };
}

const orNull = (principal: Principal | undefined): Principal | null => principal ?? null;
