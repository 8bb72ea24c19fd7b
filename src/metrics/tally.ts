/**
 * The plain in-process tally behind `figures()`: it works with no OTel SDK installed, and it is what the
 * inspector page reads live. Counters are keyed by name (the total) and by `name{reason=…}` (the share
 * of one reason); a histogram keeps `name.count`, `name.sum` and `name.max`; a gauge is read when asked.
 */
export type Figures = Record<string, number>;

export class Tally {
  private readonly values = new Map<string, number>();
  private readonly gauges = new Map<string, () => number | undefined>();

  /** Makes a counter show as 0 before its first event, so a reader sees every figure from the start. */
  declareCounter(name: string): void {
    if (!this.values.has(name)) this.values.set(name, 0);
  }

  declareHistogram(name: string): void {
    for (const part of ['count', 'sum', 'max']) this.declareCounter(`${name}.${part}`);
  }

  add(name: string, n: number, reason?: string): void {
    this.bump(name, n);
    if (reason !== undefined) this.bump(`${name}{reason=${reason}}`, n);
  }

  record(name: string, value: number): void {
    this.bump(`${name}.count`, 1);
    this.bump(`${name}.sum`, value);
    const max = `${name}.max`;
    this.values.set(max, Math.max(this.values.get(max) ?? 0, value));
  }

  /** A gauge is computed when read; undefined (nothing to report yet) leaves it out. */
  gauge(name: string, read: () => number | undefined): void {
    this.gauges.set(name, read);
  }

  figures(): Figures {
    const out: Figures = Object.fromEntries(this.values);
    for (const [name, read] of this.gauges) {
      const v = read();
      if (v !== undefined) out[name] = v;
    }
    return out;
  }

  private bump(key: string, n: number): void {
    this.values.set(key, (this.values.get(key) ?? 0) + n);
  }
}
