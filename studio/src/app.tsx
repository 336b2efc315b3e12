import { useEffect } from 'preact/hooks';
import { href, navigate, onLinkClick, useRoute } from './lib/router.ts';
import { session, useSession } from './lib/session.ts';
import { CapabilitiesPage } from './pages/capabilities.tsx';
import { CharactersPage } from './pages/characters.tsx';
import { KeysPage } from './pages/keys.tsx';
import { KnowledgePage } from './pages/knowledge.tsx';
import { PlaygroundPage } from './pages/playground.tsx';
import { ScenesPage } from './pages/scenes.tsx';
import { SignIn } from './pages/sign-in.tsx';

const PAGES = [
  { slug: 'characters', title: 'Characters' },
  { slug: 'capabilities', title: 'Capabilities' },
  { slug: 'knowledge', title: 'Knowledge' },
  { slug: 'playground', title: 'Playground' },
  { slug: 'scenes', title: 'Scenes' },
  { slug: 'keys', title: 'Keys', admin: true },
] as const;

export function App() {
  const { apiKey, adminToken } = useSession();
  const [page = 'characters', ...rest] = useRoute();
  const known = PAGES.find((p) => p.slug === page);
  useEffect(() => {
    document.title = `${known?.title ?? 'Not found'} · Troupe Studio`;
  }, [known]);
  if (!apiKey) return <SignIn />;
  const pages = PAGES.filter((p) => !('admin' in p) || adminToken);
  return (
    <div class="shell">
      <header class="top">
        <a class="brand" href={href()} onClick={onLinkClick}>
          Troupe Studio
        </a>
        <nav aria-label="Studio pages">
          {pages.map((p) => (
            <a key={p.slug} href={href(p.slug)} onClick={onLinkClick} aria-current={p.slug === page ? 'page' : undefined}>
              {p.title}
            </a>
          ))}
        </nav>
        <button
          type="button"
          class="quiet"
          onClick={() => {
            session.signOut();
            navigate(href(), true);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main">
        {page === 'characters' && <CharactersPage selected={rest[0] ?? null} />}
        {page === 'capabilities' && <CapabilitiesPage selected={rest[0] ?? null} />}
        {page === 'knowledge' && <KnowledgePage characterId={rest[0] ?? ''} />}
        {page === 'playground' && <PlaygroundPage characterId={rest[0] ?? ''} conversationId={rest[1] ?? null} />}
        {page === 'scenes' && <ScenesPage roomId={rest[0] ?? null} />}
        {page === 'keys' && (adminToken ? <KeysPage /> : <p class="empty">Sign in again with the admin token (TROUPE_ADMIN_TOKEN) to manage projects and keys.</p>)}
        {!known && <p class="empty">No studio page here. Pick one above.</p>}
      </main>
    </div>
  );
}
