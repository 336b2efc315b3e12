/**
 * Who a line of a room speaks to, by name: the director's cheap, deterministic signal, checked
 * before any model call. Names are matched case-insensitively as whole words, so "Miranda" never
 * addresses "Mira" and "Mira's" still does.
 */

export interface Named {
  characterId: string;
  name: string;
}

/** Letters, digits and `_` of any script: what a name must not touch on either side. */
const WORD_CHAR = String.raw`[\p{L}\p{N}\p{M}_]`;

/**
 * The member the text names first (full name or first name). `excludeId` (the speaker of the
 * text) is never returned: a character saying its own name is not addressing itself. A first
 * name shared with another member is ambiguous and addresses nobody; the full name still does.
 */
export function firstAddressed<T extends Named>(text: string, members: readonly T[], excludeId: string | null): T | undefined {
  let best: { member: T; at: number; length: number } | undefined;
  for (const member of members) {
    if (member.characterId === excludeId) continue;
    for (const name of callNames(member, members)) {
      const match = wholeWord(name).exec(text);
      if (!match) continue;
      // Earliest in the text wins; at the same place the longer name (a full name over another
      // member's first name); then join order (members are in join order).
      if (!best || match.index < best.at || (match.index === best.at && match[0].length > best.length)) {
        best = { member, at: match.index, length: match[0].length };
      }
    }
  }
  return best?.member;
}

/**
 * The member a model's answer names: its characterId, its full name or an unambiguous first
 * name (models answer with whichever they saw). Only `candidates` can be returned; `members`
 * decides whether a first name is ambiguous.
 */
export function resolveMember<T extends Named>(answer: string, candidates: readonly T[], members: readonly T[]): T | undefined {
  const wanted = normalise(answer);
  if (!wanted) return undefined;
  const byId = candidates.find((m) => m.characterId === answer.trim()) ?? candidates.find((m) => normalise(m.characterId) === wanted);
  if (byId) return byId;
  return candidates.find((m) => callNames(m, members).some((name) => normalise(name) === wanted));
}

/** The names a member answers to: the full name, and its first word unless another member shares it. */
function callNames(member: Named, members: readonly Named[]): string[] {
  const full = member.name.trim().replace(/\s+/g, ' ');
  if (!full) return [];
  const first = firstWord(full);
  if (first === full) return [full];
  // Another member's first word (or whole one-word name) equal to ours makes it ambiguous.
  const shared = members.some((other) => other.characterId !== member.characterId && normalise(firstWord(other.name)) === normalise(first));
  return shared ? [full] : [full, first];
}

function firstWord(name: string): string {
  return name.trim().split(/\s+/, 1)[0] ?? '';
}

function normalise(text: string): string {
  return text.trim().replace(/\s+/g, ' ').toLocaleLowerCase('en-US');
}

/** A case-insensitive whole-word pattern for a name; any run of whitespace between its words. */
function wholeWord(name: string): RegExp {
  const body = name
    .split(' ')
    .map((word) => word.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join(String.raw`\s+`);
  return new RegExp(`(?<!${WORD_CHAR})${body}(?!${WORD_CHAR})`, 'iu');
}
