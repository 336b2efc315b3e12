/**
 * Part (b) across two processes: the conversation's actor runs on Troupe A, where the messages
 * are posted, and the subscribers' WebSockets are on Troupe B; both share one PostgreSQL
 * database (a fresh one, dropped afterwards) and one Redis, so every chunk goes A's actor ->
 * Redis pub/sub -> B's ConversationEvents -> the sockets.
 *
 * Placement: A starts alone and the conversation's actor is created there (by posting one
 * message) before B starts, so no matchmaker can put it on B; Redis' room cache is then asked
 * which process holds it (redis-cli, when installed).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createTempDatabase } from '../../test/support/databases.ts';
import type { WatchedProcess } from '../support/cpu.ts';
import { runFanout, type FanoutOptions, type FanoutResult } from './fanout.ts';
import { api, createCharacter, newBootstrapKey, startTroupe, stopTroupe, type Troupe, type TroupeOptions } from './troupe.ts';
import { STAMP_PREFIX } from '../support/upstream-reply.ts';

const execFileAsync = promisify(execFile);

export interface CrossOptions {
  troupe: Omit<TroupeOptions, 'databaseUrl' | 'redisUrl' | 'key' | 'name'>;
  /** Server to create the temporary database on, e.g. postgres://postgres@127.0.0.1:5432/test. */
  databaseUrl: string;
  redisUrl: string;
  fanout: Omit<FanoutOptions, 'conversationId' | 'subscribeVia' | 'watch'>;
  upstream: WatchedProcess;
  /** Waits for a quiet machine before measuring. */
  quiet: (watch: readonly WatchedProcess[]) => Promise<void>;
}

export interface CrossResult {
  fanout: FanoutResult;
  /** Where Redis' room cache says the actor runs, next to A's and B's Colyseus process ids. */
  placement: { actorProcessId: string | null; aProcessId: string | null; bProcessId: string | null; onA: boolean | null };
  troupeExits: Record<string, string>;
}

/** A Troupe's Colyseus process id, from its `actor system ready` log line (LOG_LEVEL info or lower). */
function colyseusProcessId(troupe: Troupe): string | null {
  for (const line of troupe.child.tail().split('\n')) {
    if (!line.includes('actor system ready')) continue;
    try {
      const id = (JSON.parse(line) as { processId?: unknown }).processId;
      if (typeof id === 'string') return id;
    } catch {
      // a partial line at the start of the tail
    }
  }
  return null;
}

async function actorProcessId(redisUrl: string, roomId: string): Promise<string | null> {
  try {
    const { stdout } = await execFileAsync('redis-cli', ['-u', redisUrl, '--raw', 'hget', 'roomcaches', roomId], { timeout: 5_000 });
    const id = (JSON.parse(stdout.trim()) as { processId?: unknown }).processId;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

export async function runCrossProcessFanout(options: CrossOptions, log: (line: string) => void): Promise<CrossResult> {
  const db = await createTempDatabase(options.databaseUrl);
  const troupeExits: Record<string, string> = {};
  const shared = { ...options.troupe, databaseUrl: db.url, redisUrl: options.redisUrl, key: newBootstrapKey() };
  let a: Troupe | null = null;
  let b: Troupe | null = null;
  try {
    log(`fan-out across processes: database ${new URL(db.url).pathname.slice(1)}, Redis ${options.redisUrl}; starting A`);
    a = await startTroupe({ ...shared, name: `troupe-${shared.engine}-A` });
    const characterId = await createCharacter(a, 'Gate Guard');
    const conversation = await api<{ id: string }>(a, 'POST', '/conversations', { characterId }, 201);
    // Creates the conversation's actor on A, the only process so far.
    await api(a, 'POST', `/conversations/${conversation.id}/messages`, { content: `${STAMP_PREFIX} placement` }, 200);
    log('fan-out across processes: actor started on A; starting B');
    b = await startTroupe({ ...shared, name: `troupe-${shared.engine}-B` });
    const placement = { actorProcessId: await actorProcessId(options.redisUrl, conversation.id), aProcessId: colyseusProcessId(a), bProcessId: colyseusProcessId(b), onA: null as boolean | null };
    if (placement.actorProcessId && placement.aProcessId) placement.onA = placement.actorProcessId === placement.aProcessId;
    if (placement.onA === false) throw new Error(`the conversation's actor runs on ${placement.actorProcessId}, not on A (${placement.aProcessId})`);
    const watch = [{ name: 'troupeA', pid: a.child.pid }, { name: 'troupeB', pid: b.child.pid }, options.upstream];
    await options.quiet(watch);
    const fanout = await runFanout(a, characterId, { ...options.fanout, conversationId: conversation.id, subscribeVia: b, watch }, log);
    return { fanout, placement, troupeExits };
  } finally {
    if (b) troupeExits.B = await stopTroupe(b, 10_000);
    if (a) troupeExits.A = await stopTroupe(a, 10_000);
    await db.drop().catch((err: unknown) => log(`could not drop ${db.url}: ${(err as Error).message}`));
  }
}
