import type { Route } from './route.ts';

interface Node {
  literal: Map<string, Node>;
  param: { name: string; node: Node } | null;
  routes: Map<string, Route>;
}

export type Match =
  | { kind: 'found'; route: Route; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allow: string[] }
  | { kind: 'not_found' };

const newNode = (): Node => ({ literal: new Map(), param: null, routes: new Map() });

/** A segment trie: literal segments win over `:param` segments at the same depth. */
export class Router {
  readonly #root = newNode();
  readonly routes: Route[] = [];

  add(route: Route): void {
    let node = this.#root;
    for (const segment of split(route.path)) {
      if (segment.startsWith(':')) {
        const name = segment.slice(1);
        if (node.param && node.param.name !== name) {
          throw new Error(`conflicting parameter names :${node.param.name} and :${name} in ${route.path}`);
        }
        node.param ??= { name, node: newNode() };
        node = node.param.node;
      } else {
        let next = node.literal.get(segment);
        if (!next) {
          next = newNode();
          node.literal.set(segment, next);
        }
        node = next;
      }
    }
    if (node.routes.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
    node.routes.set(route.method, route);
    this.routes.push(route);
  }

  match(method: string, path: string): Match {
    const params: Record<string, string> = {};
    const node = walk(this.#root, split(path), 0, params);
    if (!node || node.routes.size === 0) return { kind: 'not_found' };
    const route = node.routes.get(method === 'HEAD' ? 'GET' : method);
    if (!route) return { kind: 'method_not_allowed', allow: [...node.routes.keys()].sort() };
    return { kind: 'found', route, params };
  }
}

function walk(node: Node, segments: string[], index: number, params: Record<string, string>): Node | null {
  if (index === segments.length) return node;
  const segment = segments[index] ?? '';
  const literal = node.literal.get(segment);
  if (literal) {
    const found = walk(literal, segments, index + 1, params);
    if (found && found.routes.size > 0) return found;
  }
  if (node.param && segment !== '') {
    let value: string;
    try {
      value = decodeURIComponent(segment);
    } catch {
      return null;
    }
    const found = walk(node.param.node, segments, index + 1, params);
    if (found) {
      params[node.param.name] = value;
      return found;
    }
  }
  return null;
}

function split(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return trimmed.split('/').slice(1);
}
