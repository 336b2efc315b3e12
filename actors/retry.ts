import { TroupeError } from '../src/errors.ts';
import { RoomGone } from './actor-system.ts';
import { unwrap, type Envelope } from './envelope.ts';

/**
 * An actor found while it is being disposed answers `retry`; its disposal takes milliseconds,
 * after which the next attempt makes a new one. Attempts back off up to about two seconds.
 */
const ATTEMPTS = 12;
const backOff = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.min(10 * 2 ** attempt, 400)));

/**
 * Runs `attempt` (which finds or makes the actor, then calls it) until the actor answers
 * something other than `retry`, and returns its value or throws its failure. `what` names the
 * actor in the 503 given when it keeps restarting.
 */
export async function untilAnswered<T>(what: string, attempt: () => Promise<Envelope<T>>): Promise<T> {
  for (let n = 1; ; n++) {
    const answer = await attempt().catch((err: unknown): Envelope<T> => {
      // Disposed between finding and calling it: the same as being disposed.
      if (err instanceof RoomGone) return { ok: false, retry: true };
      throw err;
    });
    if (answer.ok || !('retry' in answer)) return unwrap(answer);
    if (n >= ATTEMPTS) throw new TroupeError('service_unavailable', `The ${what} was restarting; try again.`);
    await backOff(n);
  }
}
