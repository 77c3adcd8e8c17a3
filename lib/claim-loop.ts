/**
 * The claim loop of a delivery worker (webhook events, Slack approval cards): claim passes
 * run one at a time, and a pump while one runs asks it for one more round instead of starting
 * a second (what it claims may predate the trigger); a timer wakes it for the earliest retry
 * this process knows of, when that is near (the sweep job covers the rest, and other
 * processes' work).
 */
export interface ClaimLoopOptions {
  /** One pass: claims what is due and starts it. */
  pass(): Promise<void>;
  /** A pass that threw: the caller logs it. */
  onError(err: unknown): void;
  /** After a pass threw, pump again this long after (unset: the sweep will). */
  retryAfterErrorMs?: number;
  clock: { nowMs(): number };
  /** A retry further off than this is left to the sweep. */
  maxLocalWakeMs: number;
}

export interface ClaimLoop {
  /** From now on pumps run passes (before it, and after stop(), they do nothing). */
  start(): void;
  /** Runs a pass now, or asks the running one for another round; resolves when the pass ends. */
  pump(): Promise<void>;
  /** A pass is running. */
  readonly running: boolean;
  /** Pumps at `atMs` (service clock) if that is near and earlier than the wake already set. */
  wakeAt(atMs: number): void;
  /** No pass starts any more and no timer is left; resolves when the running pass ends. */
  stop(): Promise<void>;
}

export function claimLoop(opts: ClaimLoopOptions): ClaimLoop {
  let active = false;
  let pumping: Promise<void> | null = null;
  let again = false;
  let wakeTimer: NodeJS.Timeout | null = null;
  let wakeAtMs = Infinity;
  let retryTimer: NodeJS.Timeout | null = null;

  function pump(): Promise<void> {
    if (!active) return Promise.resolve();
    if (pumping) {
      again = true;
      return pumping;
    }
    pumping = (async () => {
      try {
        do {
          again = false;
          await opts.pass();
        } while (again && active);
      } catch (err) {
        opts.onError(err);
        if (opts.retryAfterErrorMs !== undefined && active) {
          retryTimer ??= setTimeout(() => {
            retryTimer = null;
            void pump();
          }, opts.retryAfterErrorMs);
          retryTimer.unref();
        }
      } finally {
        pumping = null;
      }
    })();
    return pumping;
  }

  return {
    start() {
      active = true;
    },
    pump,
    get running() {
      return pumping !== null;
    },
    wakeAt(atMs: number) {
      const delay = atMs - opts.clock.nowMs();
      if (!active || delay > opts.maxLocalWakeMs || atMs >= wakeAtMs) return;
      if (wakeTimer) clearTimeout(wakeTimer);
      wakeAtMs = atMs;
      wakeTimer = setTimeout(() => {
        wakeTimer = null;
        wakeAtMs = Infinity;
        void pump();
      }, Math.max(0, delay) + 5);
      wakeTimer.unref();
    },
    async stop() {
      active = false;
      if (wakeTimer) clearTimeout(wakeTimer);
      if (retryTimer) clearTimeout(retryTimer);
      wakeTimer = retryTimer = null;
      await pumping;
    },
  };
}
