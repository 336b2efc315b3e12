import { and, asc, eq, gt, inArray, max } from 'drizzle-orm';
import type { Executor } from '../db/database.ts';
import { capabilities, characterCapabilities, characters } from '../db/schema.ts';
import { TroupeError } from '../errors.ts';
import type { Page } from '../projects/service.ts';
import type { Character } from './schemas.ts';

type CharacterRow = typeof characters.$inferSelect;

export async function findCharacter(db: Executor, id: string): Promise<Character | undefined> {
  const [row] = await db.select().from(characters).where(eq(characters.id, id));
  if (!row) return undefined;
  const links = await capabilityIdsOf(db, [id]);
  return toCharacter(row, links.get(id) ?? []);
}

export async function listCharacters(db: Executor, projectId: string, page: Page): Promise<Character[]> {
  const rows = await db
    .select()
    .from(characters)
    .where(and(eq(characters.projectId, projectId), page.after ? gt(characters.id, page.after) : undefined))
    .orderBy(asc(characters.id))
    .limit(page.limit);
  const links = await capabilityIdsOf(db, rows.map((r) => r.id));
  return rows.map((r) => toCharacter(r, links.get(r.id) ?? []));
}

async function capabilityIdsOf(db: Executor, characterIds: string[]): Promise<Map<string, string[]>> {
  const result = new Map<string, string[]>();
  if (characterIds.length === 0) return result;
  const rows = await db
    .select()
    .from(characterCapabilities)
    .where(inArray(characterCapabilities.characterId, characterIds))
    .orderBy(asc(characterCapabilities.characterId), asc(characterCapabilities.position));
  for (const row of rows) {
    const list = result.get(row.characterId) ?? [];
    list.push(row.capabilityId);
    result.set(row.characterId, list);
  }
  return result;
}

/**
 * Unknown ids and ids of another project are the same 400, naming the first offending id,
 * so callers learn nothing about other projects.
 */
export async function assertCapabilitiesExist(db: Executor, projectId: string, ids: readonly string[], param: (index: number) => string): Promise<void> {
  if (ids.length === 0) return;
  const found = await db
    .select({ id: capabilities.id })
    .from(capabilities)
    .where(and(eq(capabilities.projectId, projectId), inArray(capabilities.id, [...ids])));
  const known = new Set(found.map((r) => r.id));
  const index = ids.findIndex((id) => !known.has(id));
  if (index >= 0) {
    throw new TroupeError('invalid_reference', `No capability with id '${ids[index]}' exists in this project.`, {
      param: param(index),
      detailCode: 'capability_not_found',
    });
  }
}

export async function replaceCapabilities(db: Executor, characterId: string, ids: readonly string[]): Promise<void> {
  await db.delete(characterCapabilities).where(eq(characterCapabilities.characterId, characterId));
  if (ids.length === 0) return;
  await db.insert(characterCapabilities).values(ids.map((capabilityId, position) => ({ characterId, capabilityId, position })));
}

export async function appendCapability(db: Executor, characterId: string, capabilityId: string): Promise<void> {
  const [last] = await db
    .select({ position: max(characterCapabilities.position) })
    .from(characterCapabilities)
    .where(eq(characterCapabilities.characterId, characterId));
  await db
    .insert(characterCapabilities)
    .values({ characterId, capabilityId, position: (last?.position ?? -1) + 1 })
    .onConflictDoNothing();
}

export async function removeCapability(db: Executor, characterId: string, capabilityId: string): Promise<boolean> {
  const removed = await db
    .delete(characterCapabilities)
    .where(and(eq(characterCapabilities.characterId, characterId), eq(characterCapabilities.capabilityId, capabilityId)))
    .returning({ id: characterCapabilities.capabilityId });
  return removed.length > 0;
}

function toCharacter(row: CharacterRow, capabilityGroupIds: string[]): Character {
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    projectId: row.projectId,
    name: row.name,
    description: row.description,
    voiceId: row.voiceId,
    voiceDescription: row.voiceDescription,
    hasAvatar: row.hasAvatar,
    capabilityGroupIds,
  };
}
