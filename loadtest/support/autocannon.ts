/**
 * A closed-loop run with autocannon in this process (`connections` requests always in flight):
 * what the read benchmarks use to find a server's throughput. Bounded in time even if the
 * target stalls.
 */
import autocannon from 'autocannon';

export interface SaturationStats {
  requestsPerSec: number;
  latencyMs: { p50: number; p99: number };
  totalRequests: number;
  /** non-2xx replies plus socket errors and timeouts. */
  failures: number;
}

export function saturate(options: { url: string; connections: number; durationSec: number; headers: Record<string, string> }): Promise<SaturationStats> {
  return new Promise<SaturationStats>((resolve, reject) => {
    const instance = autocannon({ ...options, duration: options.durationSec, timeout: 10 }, (err: unknown, result) => {
      clearTimeout(stopTimer);
      if (err) return reject(err instanceof Error ? err : new Error(String(err)));
      resolve({
        requestsPerSec: result.requests.average,
        latencyMs: { p50: result.latency.p50, p99: result.latency.p99 },
        totalRequests: result.requests.total,
        failures: result.non2xx + result.errors + result.timeouts,
      });
    });
    const stopTimer = setTimeout(() => instance.stop(), (options.durationSec + 10) * 1000);
  });
}
