import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.ts';
import { AdminClient } from './admin-client.ts';

const USAGE = `troupe: manage Troupe projects and API keys through the admin API.

Usage:
  troupe projects create <name>
  troupe projects list
  troupe keys create <projectId> [--name <name>]
  troupe keys list <projectId>
  troupe keys revoke <keyId>

Options:
  --url <url>           Troupe base URL (default: TROUPE_URL, else http://127.0.0.1:<PORT>)
  --admin-token <t>     Admin token (default: TROUPE_ADMIN_TOKEN)
  --json                Print the raw JSON reply
  -h, --help            Show this help
`;

/** Runs one CLI command; returns the process exit code. Output goes to the given writers. */
export async function runCli(
  argv: string[],
  env: Readonly<Record<string, string | undefined>>,
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        'admin-token': { type: 'string' },
        name: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (e) {
    err(`${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    out(USAGE);
    return values.help ? 0 : 2;
  }
  let config;
  try {
    config = loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) {
      err(`${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const token = values['admin-token'] ?? config.adminToken;
  if (!token) {
    err('No admin token: pass --admin-token or set TROUPE_ADMIN_TOKEN (the server must run with the same value).\n');
    return 2;
  }
  const url = values.url ?? config.cliUrl ?? `http://127.0.0.1:${config.port}`;
  const admin = new AdminClient(url, token);
  const [resource, action, arg] = positionals;
  const print = (value: unknown, text: string) => out(values.json ? `${JSON.stringify(value, null, 2)}\n` : text);
  const need = (what: string): string => {
    if (!arg) throw new UsageError(`Missing <${what}>.`);
    return arg;
  };

  try {
    switch (`${resource} ${action}`) {
      case 'projects create': {
        const project = await admin.createProject(need('name'));
        print(project, `Created project ${project.id} (${project.name})\n`);
        return 0;
      }
      case 'projects list': {
        const projects = await admin.listProjects();
        print(projects, projects.map((p) => `${p.id}\t${p.name}\t${p.createdAt}\n`).join(''));
        return 0;
      }
      case 'keys create': {
        const key = await admin.createKey(need('projectId'), values.name ?? null);
        print(key, `Created key ${key.id} for project ${key.projectId}. It is shown only now:\n\n  ${key.key}\n\n`);
        return 0;
      }
      case 'keys list': {
        const keys = await admin.listKeys(need('projectId'));
        print(keys, keys.map((k) => `${k.id}\t${k.prefix}…\t${k.name ?? '-'}\t${k.revokedAt ? `revoked ${k.revokedAt}` : 'active'}\n`).join(''));
        return 0;
      }
      case 'keys revoke': {
        const key = await admin.revokeKey(need('keyId'));
        print(key, `Revoked key ${key.id} at ${key.revokedAt}\n`);
        return 0;
      }
      default:
        throw new UsageError(`Unknown command: ${positionals.join(' ')}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      err(`${e.message}\n\n${USAGE}`);
      return 2;
    }
    err(`${(e as Error).message}\n`);
    return 1;
  }
}

class UsageError extends Error {}

if (import.meta.main) {
  process.exitCode = await runCli(
    process.argv.slice(2),
    process.env,
    (t) => process.stdout.write(t),
    (t) => process.stderr.write(t),
  );
}
