import { describe, expect, it } from 'vitest';
import { ID_PREFIX, isId, newId } from '../../src/ids.ts';

describe('ids', () => {
  it('carries the prefixes of the interface', () => {
    expect(ID_PREFIX).toMatchObject({
      character: 'character_',
      capability: 'capability_',
      conversation: 'conv_',
      message: 'msg_',
      document: 'doc_',
      room: 'room_',
      participant: 'participant_',
    });
    expect(newId('character')).toMatch(/^character_[0-9a-z]{26}$/);
    expect(isId('capability', newId('capability'))).toBe(true);
    expect(isId('capability', newId('character'))).toBe(false);
  });

  it('sorts in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 1000 }, () => newId('message', 1_700_000_000_000));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(newId('message', 1_700_000_000_001) > ids.at(-1)!).toBe(true);
  });
});
