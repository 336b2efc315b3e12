import { and, asc, eq, gt } from 'drizzle-orm';
import type { Invalidations } from '../cache/invalidations.ts';
import type { ReadCache } from '../cache/read-cache.ts';
import type { Db } from '../db/database.ts';
import { capabilities, characterCapabilities } from '../db/schema.ts';
import { TroupeError, notFound } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Page } from '../projects/service.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { webhookRule, type Capability, type CreateCapabilityInput, type UpdateCapabilityInput } from './schemas.ts';

export class CapabilityService {
  readonly #db: Db;
  readonly #invalidations: Invalidations;
  readonly #cache: ReadCache<Capability>;

  constructor(options: { db: Db; invalidations: Invalidations; cacheMaxEntries: number }) {
    this.#db = options.db;
    this.#invalidations = options.invalidations;
    this.#cache = this.#invalidations.cache('capability', {
      maxEntries: options.cacheMaxEntries,
      load: async (id) => {
        const [row] = await this.#db.select().from(capabilities).where(eq(capabilities.id, id));
        return row ? Object.freeze(toCapability(row)) : undefined;
      },
    });
  }

  async create(projectId: string, input: CreateCapabilityInput): Promise<Capability> {
    try {
      const [row] = await this.#db
        .insert(capabilities)
        .values({ id: newId('capability'), projectId, ...input })
        .returning();
      if (!row) throw new Error('insert returned no row');
      return toCapability(row);
    } catch (err) {
      throw nameConflict(err, input.name);
    }
  }

  async list(projectId: string, page: Page): Promise<Capability[]> {
    const rows = await this.#db
      .select()
      .from(capabilities)
      .where(and(eq(capabilities.projectId, projectId), page.after ? gt(capabilities.id, page.after) : undefined))
      .orderBy(asc(capabilities.id))
      .limit(page.limit);
    return rows.map(toCapability);
  }

  async get(projectId: string, id: string): Promise<Capability> {
    const [row] = await this.#db
      .select()
      .from(capabilities)
      .where(and(eq(capabilities.projectId, projectId), eq(capabilities.id, id)));
    if (!row) throw notFound('capability', id);
    return toCapability(row);
  }

  /**
   * The capabilities with these ids, in the order given, from the cache (the hot path of
   * replies and perform); ids that do not exist in the project are skipped.
   */
  async getMany(projectId: string, ids: readonly string[]): Promise<Capability[]> {
    const found = await Promise.all(ids.map((id) => this.#cache.get(id)));
    return found.filter((c): c is Capability => c !== undefined && c.projectId === projectId);
  }

  async update(projectId: string, id: string, input: UpdateCapabilityInput): Promise<Capability> {
    const changes = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined));
    if (Object.keys(changes).length === 0) return this.get(projectId, id);
    try {
      const updated = await this.#db.transaction(async (tx) => {
        const [row] = await tx
          .update(capabilities)
          .set(changes)
          .where(and(eq(capabilities.projectId, projectId), eq(capabilities.id, id)))
          .returning();
        if (!row) throw notFound('capability', id);
        const problem = webhookRule(row.type, row.webhookUrl);
        if (problem) throw new TroupeError('invalid_request', `Invalid 'webhookUrl': ${problem}.`, { param: 'webhookUrl', detailCode: 'invalid_parameter' });
        await this.#invalidations.publish(tx, 'capability', [id]);
        return toCapability(row);
      });
      this.#invalidations.applyLocal('capability', [id]);
      return updated;
    } catch (err) {
      throw nameConflict(err, input.name);
    }
  }

  /** Deleting a capability detaches it from every character that had it. */
  async delete(projectId: string, id: string): Promise<{ id: string; deleted: true }> {
    const affected = await this.#db.transaction(async (tx) => {
      const links = await tx
        .select({ characterId: characterCapabilities.characterId })
        .from(characterCapabilities)
        .where(eq(characterCapabilities.capabilityId, id));
      const [row] = await tx
        .delete(capabilities)
        .where(and(eq(capabilities.projectId, projectId), eq(capabilities.id, id)))
        .returning({ id: capabilities.id });
      if (!row) throw notFound('capability', id);
      const characterIds = links.map((l) => l.characterId);
      await this.#invalidations.publish(tx, 'character', characterIds);
      await this.#invalidations.publish(tx, 'capability', [id]);
      return characterIds;
    });
    this.#invalidations.applyLocal('character', affected);
    this.#invalidations.applyLocal('capability', [id]);
    return { id, deleted: true };
  }
}

function nameConflict(err: unknown, name: string | undefined): unknown {
  if (isUniqueViolation(err) && name !== undefined) {
    return new TroupeError('conflict', `A capability named '${name}' already exists in this project.`, {
      param: 'name',
      detailCode: 'capability_name_taken',
    });
  }
  return err;
}

function toCapability(row: typeof capabilities.$inferSelect): Capability {
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    projectId: row.projectId,
    name: row.name,
    description: row.description,
    type: row.type,
    parameters: row.parameters,
    webhookUrl: row.webhookUrl,
  };
}
