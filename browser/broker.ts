/**
 * The seam between leases and what runs the browsers (ARCHITECTURE.md, Seams): the
 * Chromium broker (chromium-broker.ts) today. One shared browser process per broker and a
 * fresh, isolated browser context per lease; the context's traffic goes through the gateway
 * with the lease's environment's proxy credentials.
 */
export interface StorageState {
  cookies: unknown[];
  origins: unknown[];
}

export interface OpenLease {
  id: string;
  /** The profile's signed-in state (read and write leases), or null (clean, or a new profile). */
  storageState: StorageState | null;
  proxy: { server: string; username: string; password: string };
}

export interface BrowserBroker {
  /** Whether the browser process is up (takeover answers 503 host_unavailable otherwise). */
  up(): boolean;
  /** Opens the lease's context (starting the browser if it is not running). */
  open(lease: OpenLease): Promise<void>;
  /** Makes sure the lease's context shows a page (a takeover needs one to show). */
  ensurePage(leaseId: string): Promise<void>;
  /** The context's signed-in state now (cookies incl. HttpOnly, localStorage): Playwright's storageState shape. */
  exportState(leaseId: string): Promise<StorageState>;
  /** Closes the lease's context; nothing of it stays. */
  close(leaseId: string): Promise<void>;
  has(leaseId: string): boolean;
  shutdown(): Promise<void>;
}
