/**
 * Readiness (issue 25, item 1): named checks, each `ok` or `failing`, for `GET /readyz`.
 *
 * A check is a function that resolves true when its part works. It fails when it resolves
 * false, throws, or takes longer than the timeout (a store that stopped answering must turn a
 * node unready within seconds, not after a connection pool's minute-long acquire timeout).
 * The answer names the checks and nothing else: no address, no error text (an error may
 * carry a database URL); why a check failed goes to the log, once per change.
 *
 * Callers arriving while a round runs share it: a load balancer polling every node every
 * second costs the store one round per poll, however many probes overlap.
 */
export type CheckState = 'ok' | 'failing';

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, CheckState>;
}

export interface Readiness {
  check(): Promise<ReadinessReport>;
}

export type Check = () => boolean | Promise<boolean>;

export function createReadiness(
  checks: Record<string, Check>,
  opts: { timeoutMs?: number; onChange?: (name: string, state: CheckState, err: unknown) => void } = {},
): Readiness {
  const timeoutMs = opts.timeoutMs ?? 2000;
  const last = new Map<string, CheckState>();
  let round: Promise<ReadinessReport> | null = null;

  async function one(name: string, check: Check): Promise<CheckState> {
    let timer: NodeJS.Timeout | undefined;
    let err: unknown = null;
    let ok = false;
    try {
      ok = await Promise.race([
        Promise.resolve().then(check),
        new Promise<boolean>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch (e) {
      err = e;
      ok = false;
    } finally {
      clearTimeout(timer);
    }
    const state: CheckState = ok === true ? 'ok' : 'failing';
    if (last.get(name) !== state) {
      // The first round reports only failures: a node that starts ready says nothing.
      if (last.has(name) || state === 'failing') opts.onChange?.(name, state, err);
      last.set(name, state);
    }
    return state;
  }

  async function run(): Promise<ReadinessReport> {
    const names = Object.keys(checks);
    const states = await Promise.all(names.map((n) => one(n, checks[n]!)));
    const out: Record<string, CheckState> = {};
    names.forEach((n, i) => (out[n] = states[i]!));
    return { ready: states.every((s) => s === 'ok'), checks: out };
  }

  return {
    check() {
      round ??= run().finally(() => {
        round = null;
      });
      return round;
    },
  };
}
