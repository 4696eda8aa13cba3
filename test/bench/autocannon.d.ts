declare module 'autocannon' {
  interface Histogram {
    average: number;
    p50: number;
    p90: number;
    p99: number;
    max: number;
  }
  interface Result {
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
    non2xx: number;
    errors: number;
    timeouts: number;
  }
  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    amount?: number;
    /** Each connection cycles through these; setupRequest may rewrite a request (e.g. its path) before it is sent. */
    requests?: { setupRequest?: (req: { path: string }) => { path: string } }[];
  }
  function autocannon(opts: Options): Promise<Result>;
  export default autocannon;
}
