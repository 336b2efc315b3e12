/** The benchmarks' BENCH_* settings, with the same errors everywhere. */
export const envText = (name: string): string | undefined => process.env[name]?.trim() || undefined;
export const envFlag = (name: string): boolean => ['1', 'true', 'yes'].includes(envText(name) ?? '');
export const envDatabaseUrl = (): string => envText('BENCH_DATABASE_URL') ?? 'postgres://postgres@127.0.0.1:5432/test';
export const redactUrl = (url: string): string => url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
/** A number >= `min` (an integer unless `integer` is false), or `fallback` when unset. */
export function envNumber(name: string, fallback: number, min: number, integer = true): number {
  const raw = envText(name);
  const value = Number(raw ?? fallback);
  if (raw === undefined || (Number.isFinite(value) && value >= min && (!integer || Number.isInteger(value)))) return value;
  throw new Error(`${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got '${raw}'`);
}
/** A comma-separated subset of `known` (all of them when unset), in `known`'s order. */
export function envList<T extends string>(name: string, known: readonly T[]): T[] {
  const wanted = (envText(name) ?? known.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = wanted.filter((w) => !(known as readonly string[]).includes(w));
  if (unknown.length > 0) throw new Error(`${name}: unknown ${unknown.join(', ')}; known: ${known.join(', ')}`);
  return known.filter((k) => wanted.includes(k));
}
/** Comma-separated positive numbers, deduplicated and ascending. */
export function envRates(name: string, fallback: string): number[] {
  const raw = envText(name) ?? fallback;
  const rates = raw.split(',').map((s) => Number(s.trim()));
  if (rates.some((r) => !Number.isFinite(r) || r <= 0)) throw new Error(`${name} must be positive numbers, got '${raw}'`);
  return [...new Set(rates)].sort((a, b) => a - b);
}
export function envLogLevel(name: string, fallback: string): string {
  const value = envText(name) ?? fallback;
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (!levels.includes(value)) throw new Error(`${name} must be one of ${levels.join(', ')}`);
  return value;
}
