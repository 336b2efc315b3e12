import { useEffect, useRef, useState } from 'preact/hooks';
import { enc, socketUrl } from './api.ts';
import type { TranscriptEntry } from './types.ts';

export interface RoomLive {
  state: 'connecting' | 'open' | 'closed';
  transcript: TranscriptEntry[];
  /** The character holding the floor; null when it is the players'. */
  speaking: string | null;
  /** What the speaking character has said so far of its current line. */
  partial: { characterId: string; text: string } | null;
  errors: { key: number; message: string; code: string | null }[];
  send: (content: string, speakerName: string) => boolean;
  reconnect: () => void;
}

/** The room WebSocket: the transcript as it grows, who speaks, and the line under way. */
export function useRoomLive(roomId: string, initial: TranscriptEntry[] | null, onRoomChanged: () => void): RoomLive {
  const [state, setState] = useState<RoomLive['state']>('connecting');
  const [transcript, setTranscript] = useState<TranscriptEntry[]>([]);
  const [speaking, setSpeaking] = useState<string | null>(null);
  const [partial, setPartial] = useState<RoomLive['partial']>(null);
  const [errors, setErrors] = useState<RoomLive['errors']>([]);
  const [attempt, setAttempt] = useState(0);
  const socket = useRef<WebSocket | null>(null);
  const changed = useRef(onRoomChanged);
  changed.current = onRoomChanged;

  useEffect(() => {
    if (initial === null) return;
    setTranscript(initial);
    setState('connecting');
    const ws = new WebSocket(socketUrl(`/v1/rooms/${enc(roomId)}/ws`));
    socket.current = ws;
    ws.onmessage = (message) => {
      const event = JSON.parse(String(message.data)) as Record<string, unknown>;
      switch (event.type) {
        case 'ready':
          setState('open');
          break;
        case 'transcript': {
          const entry = event.entry as TranscriptEntry;
          setTranscript((all) => (all.some((e) => e.id === entry.id) ? all : [...all, entry]));
          if (entry.speakerType === 'agent') setPartial(null);
          break;
        }
        case 'speaker':
          setSpeaking((event.characterId as string | null) ?? null);
          break;
        case 'chunk': {
          // The line's transcript event carries the whole text; the partial is only for the line under way.
          if (event.done === true) setPartial(null);
          else {
            const characterId = event.characterId as string;
            setPartial((p) => ({ characterId, text: (p?.characterId === characterId ? p.text : '') + String(event.content) }));
          }
          break;
        }
        case 'participant':
        case 'ended':
          changed.current();
          break;
        case 'error':
          setErrors((all) => [...all, { key: all.length, message: String(event.message), code: (event.code as string | null) ?? null }]);
          break;
      }
    };
    ws.onclose = () => setState('closed');
    return () => ws.close();
  }, [roomId, initial, attempt]);

  return {
    state,
    transcript,
    speaking,
    partial,
    errors,
    send: (content, speakerName) => {
      if (socket.current?.readyState !== WebSocket.OPEN) return false;
      socket.current.send(JSON.stringify({ content, ...(speakerName.trim() ? { speakerName: speakerName.trim() } : {}) }));
      return true;
    },
    reconnect: () => setAttempt((n) => n + 1),
  };
}
