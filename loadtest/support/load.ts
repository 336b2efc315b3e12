import autocannon from 'autocannon';

/** One autocannon run, in this process, bounded in time even if the target stalls. */

export interface LoadOptions {
  url: string;
  connections: number;
  durationSec: number;
  headers: Record<string, string>;
}

export interface LoadStats {
  durationSec: number;
  connections: number;
  requestsPerSec: { average: number; stddev: number; min: number; max: number };
  latencyMs: { average: number; p50: number; p90: number; p99: number; max: number };
  totalRequests: number;
  status2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  bytesPerSec: number;
  /** Wall-clock window of the run on the monotonic clock, in microseconds (matches V8 profiles). */
  monotonicUs: { start: number; end: number };
}

/** Seconds allowed beyond the requested duration before the run is stopped, then abandoned. */
const STOP_SLACK_SEC = 10;
const ABANDON_SLACK_SEC = 10;

export function runLoad(options: LoadOptions): Promise<LoadStats> {
  return new Promise<LoadStats>((resolve, reject) => {
    let settled = false;
    const startUs = monotonicUs();
    let abandonTimer: NodeJS.Timeout | undefined;
    const stopTimer = setTimeout(() => {
      instance.stop();
      abandonTimer = setTimeout(() => {
        if (settled) return;
        settled = true;
        reject(new Error(`autocannon against ${options.url} did not finish after stop()`));
      }, ABANDON_SLACK_SEC * 1000);
    }, (options.durationSec + STOP_SLACK_SEC) * 1000);

    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        duration: options.durationSec,
        headers: options.headers,
        timeout: 10,
      },
      (err: unknown, result) => {
        clearTimeout(stopTimer);
        clearTimeout(abandonTimer);
        if (settled) return;
        settled = true;
        if (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        resolve(summarize(result, options.connections, { start: startUs, end: monotonicUs() }));
      },
    );
  });
}

function summarize(result: autocannon.Result, connections: number, window: LoadStats['monotonicUs']): LoadStats {
  return {
    durationSec: result.duration,
    connections,
    requestsPerSec: {
      average: result.requests.average,
      stddev: result.requests.stddev,
      min: result.requests.min,
      max: result.requests.max,
    },
    latencyMs: {
      average: result.latency.average,
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
    },
    totalRequests: result.requests.total,
    status2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    bytesPerSec: result.throughput.average,
    monotonicUs: window,
  };
}

/** CLOCK_MONOTONIC in microseconds: the clock V8 uses for `.cpuprofile` timestamps on Linux. */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}
