import { Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { RequestMetrics } from './request-metrics.ts';

/** Prometheus metrics of one process; a registry per server so tests do not share counters. */
export class Metrics {
  readonly registry = new Registry();
  readonly #requests = new RequestMetrics();

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'troupe_' });
    for (const collector of this.#requests.collectors()) this.registry.registerMetric(collector as unknown as Metric);
  }

  requestStarted(): void {
    this.#requests.started();
  }

  /** Ends a request begun with requestStarted. `route` is the route pattern (never the raw path) so label cardinality stays bounded. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.#requests.finished(method, route, status, seconds);
  }

  async render(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
