// What the health writer remembers between passes: each pod's last counters, each credential's window of attempts,
// last use, newest probe and key version, and how long each pod has lagged behind each account. In memory only (a
// new leader starts from the stored statuses); no I/O.
import type { GatewayStatusReport } from '../../contract/gateway-status.ts';
import { counterDelta, type OutcomeCounts, OutcomeWindow, type ProbeReport, ZERO_COUNTS } from './evaluate.ts';

/** A pod behind an account's current versions, as one pass sees it. */
export interface PodLag {
  /** It has lagged for the stale threshold or longer. */
  stale: boolean;
  /** This is the first pass that finds it stale: the one that warns. */
  firstStale: boolean;
  lagMs: number;
}

export class HealthMemory {
  /** pod → last report's counters and instance. */
  private readonly previous = new Map<string, { instance: string; counters: Record<string, OutcomeCounts> }>();
  private readonly windows = new Map<string, OutcomeWindow>();
  private readonly lastUsed = new Map<string, number>();
  /** Newest probe result per credential, across pods. */
  private readonly probes = new Map<string, ProbeReport>();
  /** The key version each credential's health window counts: a new version starts a new window. */
  private readonly keyVersions = new Map<string, string>();
  /** Credentials rotated away from a False verdict: their first True after it is still an UpstreamRecovered. */
  private readonly rotatedFromFalse = new Set<string>();
  /** pod\0namespace → since when it lags, and whether it was reported. */
  private readonly lagging = new Map<string, { since: number; warned: boolean }>();
  /** pod\0instance\0namespace\0reason of the refusals already reported: one Event each (a pod retries a refused batch on every reconnect). */
  private readonly refusals = new Set<string>();
  /** Before the first report a credential counts as used at start: it is not probed the moment a leader starts. */
  private readonly startedAt: number;

  constructor(startedAt: number) {
    this.startedAt = startedAt;
  }

  /** The reports of the pods that answered → windows, last use, probes. Pods no longer found are forgotten. */
  absorb(reports: ReadonlyMap<string, GatewayStatusReport>, found: readonly { pod: string }[], now: number): void {
    for (const [pod, report] of reports) {
      const prev = this.previous.get(pod);
      const before = prev && prev.instance === report.instance ? prev.counters : undefined;
      const counters: Record<string, OutcomeCounts> = {};
      for (const [id, c] of Object.entries(report.credentials)) {
        counters[id] = {
          ok: c.ok,
          unauthorized: c.unauthorized,
          rateLimited: c.rateLimited,
          upstreamError: c.upstreamError,
        };
        const delta = counterDelta(counters[id], before?.[id]);
        let w = this.windows.get(id);
        if (!w) this.windows.set(id, (w = new OutcomeWindow()));
        w.add(now, delta);
        const used = Math.max(c.lastSuccess ?? 0, c.lastFailure ?? 0);
        if (used > (this.lastUsed.get(id) ?? 0)) this.lastUsed.set(id, used);
      }
      this.previous.set(pod, { instance: report.instance, counters });
      for (const [id, p] of Object.entries(report.probes ?? {}))
        if (p.at > (this.probes.get(id)?.at ?? 0)) this.probes.set(id, p);
    }
    for (const pod of this.previous.keys()) if (!found.some((f) => f.pod === pod)) this.previous.delete(pod);
  }

  /**
   * Records the key version a credential is compiled with; true when it changed since the last pass. A rotated key
   * starts with a clean slate: the old key's 401s and 429s say nothing about the new one.
   */
  rotate(id: string, keyVersion: string | undefined): boolean {
    const rotated = keyVersion !== undefined && this.keyVersions.has(id) && this.keyVersions.get(id) !== keyVersion;
    if (keyVersion !== undefined) this.keyVersions.set(id, keyVersion);
    if (rotated) {
      this.windows.delete(id);
      this.probes.delete(id);
    }
    return rotated;
  }

  /** The attempts of the last windowMs. */
  window(id: string, now: number, windowMs: number): OutcomeCounts {
    return this.windows.get(id)?.sum(now, windowMs) ?? { ...ZERO_COUNTS };
  }

  probe(id: string): ProbeReport | undefined {
    return this.probes.get(id);
  }

  lastUsedAt(id: string): number | undefined {
    return this.lastUsed.get(id);
  }

  /** When a credential was last used or its probe last reported. */
  idleSince(id: string): number {
    return Math.max(this.lastUsed.get(id) ?? this.startedAt, this.probes.get(id)?.at ?? 0);
  }

  markRotatedFromFalse(id: string): void {
    this.rotatedFromFalse.add(id);
  }

  /**
   * A written UpstreamHealthy transition: whether it leaves a False verdict (the stored one, or one rotated away
   * from). Any verdict but Unknown settles a rotation.
   */
  recovers(id: string, storedFalse: boolean, status: string): boolean {
    const recovered = storedFalse || this.rotatedFromFalse.has(id);
    if (status !== 'Unknown') this.rotatedFromFalse.delete(id);
    return recovered;
  }

  /** Forgets the credentials not in `seen` (deleted); returns them. */
  forgetCredentialsExcept(seen: ReadonlySet<string>): string[] {
    const gone = new Set<string>();
    for (const id of [...this.windows.keys(), ...this.probes.keys(), ...this.keyVersions.keys()])
      if (!seen.has(id)) gone.add(id);
    for (const id of gone) {
      this.windows.delete(id);
      this.keyVersions.delete(id);
      this.rotatedFromFalse.delete(id);
      this.lastUsed.delete(id);
      this.probes.delete(id);
    }
    return [...gone];
  }

  /** Whether a pod serves an account's current versions, remembered from pass to pass; undefined when it does. */
  lag(pod: string, ns: string, current: boolean, now: number, staleAfterMs: number): PodLag | undefined {
    const key = `${pod}\u0000${ns}`;
    if (current) {
      this.lagging.delete(key);
      return undefined;
    }
    let lag = this.lagging.get(key);
    if (!lag) this.lagging.set(key, (lag = { since: now, warned: false }));
    const stale = now - lag.since >= staleAfterMs;
    const firstStale = stale && !lag.warned;
    if (firstStale) lag.warned = true;
    return { stale, firstStale, lagMs: now - lag.since };
  }

  /** True the first time a pod's refusal (by its reason) is seen for an account. */
  firstRefusal(pod: string, instance: string, ns: string, reason: string): boolean {
    const key = `${pod}\u0000${instance}\u0000${ns}\u0000${reason}`;
    if (this.refusals.has(key)) return false;
    if (this.refusals.size >= 10_000) this.refusals.delete(this.refusals.values().next().value!);
    this.refusals.add(key);
    return true;
  }

  /** Forgets the lag and refusals of pods no longer found. */
  forgetPodsExcept(found: readonly { pod: string }[]): void {
    const gone = (key: string) => !found.some((f) => key.startsWith(`${f.pod}\u0000`));
    for (const key of this.lagging.keys()) if (gone(key)) this.lagging.delete(key);
    for (const key of this.refusals) if (gone(key)) this.refusals.delete(key);
  }
}
