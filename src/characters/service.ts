import { and, eq } from 'drizzle-orm';
import type { Invalidations } from '../cache/invalidations.ts';
import type { ReadCache } from '../cache/read-cache.ts';
import type { Db, Tx } from '../db/database.ts';
import { characters } from '../db/schema.ts';
import { TroupeError, notFound } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Page } from '../projects/service.ts';
import {
  appendCapability,
  assertCapabilitiesExist,
  findCharacter,
  listCharacters,
  removeCapability,
  replaceCapabilities,
} from './repository.ts';
import type { Character, CreateCharacterInput, UpdateCharacterInput } from './schemas.ts';

/**
 * Characters, with reads served from a cache that every process invalidates through the
 * database (see Invalidations), so the hot paths (GET, later conversations and perform) do
 * not query the database once a character is warm.
 */
export class CharacterService {
  readonly #db: Db;
  readonly #invalidations: Invalidations;
  readonly #cache: ReadCache<Character>;

  constructor(options: { db: Db; invalidations: Invalidations; cacheMaxEntries: number }) {
    this.#db = options.db;
    this.#invalidations = options.invalidations;
    this.#cache = this.#invalidations.cache('character', {
      maxEntries: options.cacheMaxEntries,
      load: async (id) => {
        const found = await findCharacter(this.#db, id);
        return found ? Object.freeze(found) : undefined;
      },
    });
  }

  /** The returned object is shared with the cache and frozen: copy before changing it. */
  async get(projectId: string, id: string): Promise<Character> {
    const character = await this.#cache.get(id);
    if (!character || character.projectId !== projectId) throw notFound('character', id);
    return character;
  }

  async list(projectId: string, page: Page): Promise<Character[]> {
    return listCharacters(this.#db, projectId, page);
  }

  /** Every character of the project, page by page (for the /v1 model list). */
  async listAll(projectId: string): Promise<Character[]> {
    const all: Character[] = [];
    for (let after: string | undefined; ; ) {
      const page = await listCharacters(this.#db, projectId, { limit: 1000, after });
      all.push(...page);
      if (page.length < 1000) return all;
      after = page.at(-1)?.id;
    }
  }

  async create(projectId: string, input: CreateCharacterInput): Promise<Character> {
    return this.#db.transaction(async (tx) => {
      const { capabilityGroupIds, ...fields } = input;
      await assertCapabilitiesExist(tx, projectId, capabilityGroupIds, (i) => `capabilityGroupIds[${i}]`);
      const id = newId('character');
      await tx.insert(characters).values({ id, projectId, ...fields });
      await replaceCapabilities(tx, id, capabilityGroupIds);
      return this.#reload(tx, id);
    });
  }

  async update(projectId: string, id: string, input: UpdateCharacterInput): Promise<Character> {
    return this.#write(projectId, id, async (tx) => {
      const { capabilityGroupIds, ...fields } = input;
      const changes = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
      if (Object.keys(changes).length > 0) await tx.update(characters).set(changes).where(eq(characters.id, id));
      if (capabilityGroupIds) {
        await assertCapabilitiesExist(tx, projectId, capabilityGroupIds, (i) => `capabilityGroupIds[${i}]`);
        await replaceCapabilities(tx, id, capabilityGroupIds);
      }
    });
  }

  /** Attaching an attached capability changes nothing and answers the character as it is. */
  async attachCapability(projectId: string, id: string, capabilityId: string): Promise<Character> {
    return this.#write(projectId, id, async (tx) => {
      await assertCapabilitiesExist(tx, projectId, [capabilityId], () => 'capabilityId');
      await appendCapability(tx, id, capabilityId);
    });
  }

  async detachCapability(projectId: string, id: string, capabilityId: string): Promise<Character> {
    return this.#write(projectId, id, async (tx) => {
      if (!(await removeCapability(tx, id, capabilityId))) {
        throw new TroupeError('not_found', `Capability '${capabilityId}' is not attached to character '${id}'.`, {
          detailCode: 'capability_not_attached',
        });
      }
    });
  }

  /** Removes the character and everything that belongs to it (foreign keys cascade). */
  async delete(projectId: string, id: string): Promise<{ id: string; deleted: true }> {
    await this.#db.transaction(async (tx) => {
      const [row] = await tx
        .delete(characters)
        .where(and(eq(characters.projectId, projectId), eq(characters.id, id)))
        .returning({ id: characters.id });
      if (!row) throw notFound('character', id);
      await this.#invalidations.publish(tx, 'character', [id]);
    });
    this.#invalidations.applyLocal('character', [id]);
    return { id, deleted: true };
  }

  /** Locks the character row, applies `change`, tells every process, returns the new state. */
  async #write(projectId: string, id: string, change: (tx: Tx) => Promise<void>): Promise<Character> {
    const character = await this.#db.transaction(async (tx) => {
      const [row] = await tx
        .select({ id: characters.id })
        .from(characters)
        .where(and(eq(characters.projectId, projectId), eq(characters.id, id)))
        .for('update');
      if (!row) throw notFound('character', id);
      await change(tx);
      await this.#invalidations.publish(tx, 'character', [id]);
      return this.#reload(tx, id);
    });
    this.#invalidations.applyLocal('character', [id]);
    return character;
  }

  async #reload(tx: Tx, id: string): Promise<Character> {
    const character = await findCharacter(tx, id);
    if (!character) throw new Error(`character ${id} vanished inside its own transaction`);
    return character;
  }
}
