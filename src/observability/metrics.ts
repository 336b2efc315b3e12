import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one process; a registry per server so tests do not share counters. */
export class Metrics {
  readonly registry = new Registry();
  readonly #requests: Counter<'method' | 'route' | 'status'>;
  readonly #duration: Histogram<'method' | 'route' | 'status'>;
  readonly #inFlight: Gauge;
  /** Label children per (method, route, status): resolving labels on every request was costly. */
  readonly #series = new Map<string, { count: { inc(): void }; duration: { observe(v: number): void } }>();

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'troupe_' });
    this.#requests = new Counter({
      name: 'troupe_http_requests_total',
      help: 'HTTP requests answered, by route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.#duration = new Histogram({
      name: 'troupe_http_request_duration_seconds',
      help: 'Time from request to reply, by route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.#inFlight = new Gauge({
      name: 'troupe_http_requests_in_flight',
      help: 'Requests received and not yet answered',
      registers: [this.registry],
    });
  }

  requestStarted(): void {
    this.#inFlight.inc();
  }

  /** Ends a request begun with requestStarted. `route` is the route pattern (never the raw path) so label cardinality stays bounded. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.#inFlight.dec();
    const key = `${method} ${route} ${status}`;
    let series = this.#series.get(key);
    if (!series) {
      const labels = { method, route, status: String(status) };
      series = { count: this.#requests.labels(labels), duration: this.#duration.labels(labels) };
      this.#series.set(key, series);
    }
    series.count.inc();
    series.duration.observe(seconds);
  }

  async render(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
