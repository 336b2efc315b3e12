import { useEffect, useState } from 'preact/hooks';

const BASE = '/studio';
const listeners = new Set<() => void>();

/** The path under /studio, split: `/studio/knowledge/character_1` -> ['knowledge', 'character_1']. */
function currentSegments(): string[] {
  const rest = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '';
  return rest.split('/').filter(Boolean).map(decodeURIComponent);
}

export function href(...segments: string[]): string {
  return [BASE, ...segments.map(encodeURIComponent)].join('/');
}

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  for (const listener of listeners) listener();
}

addEventListener('popstate', () => {
  for (const listener of listeners) listener();
});

export function useRoute(): string[] {
  const [segments, setSegments] = useState(currentSegments);
  useEffect(() => {
    const listener = () => setSegments(currentSegments());
    listeners.add(listener);
    return () => listeners.delete(listener);
  }, []);
  return segments;
}

/** Client-side navigation for plain left clicks; the link still works opened in a new tab. */
export function onLinkClick(event: MouseEvent): void {
  const anchor = event.currentTarget as HTMLAnchorElement;
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(anchor.pathname);
}
