import type { EnvBrowser } from './env-browser.js';

/**
 * The seam between leases and what runs the browsers (ARCHITECTURE.md, Seams): the
 * Chromium broker (chromium-broker.ts). One sandboxed browser process per environment
 * (issue 23, item 1) and a fresh, isolated browser context per lease; the browser's traffic
 * goes through the gateway as its environment.
 */
export interface StorageState {
  cookies: unknown[];
  origins: unknown[];
}

export interface OpenLease {
  id: string;
  environmentId: string;
  /** The profile's signed-in state (read and write leases), or null (clean, or a new profile). */
  storageState: StorageState | null;
}

export interface BrowserBroker {
  /** Whether browsers can run here (takeover answers 503 host_unavailable otherwise). */
  up(): boolean;
  /** Opens the lease's context (starting its environment's browser if it is not running). */
  open(lease: OpenLease): Promise<void>;
  /** Makes sure the lease's context shows a page (a takeover needs one to show). */
  ensurePage(leaseId: string): Promise<void>;
  /** Before a person takes over: every page of the lease loaded afresh (no agent script survives). */
  prepareForPerson(leaseId: string): Promise<void>;
  /** The context's signed-in state now (cookies incl. HttpOnly, localStorage): Playwright's storageState shape. */
  exportState(leaseId: string): Promise<StorageState>;
  /** Closes the lease's context; nothing of it stays. */
  close(leaseId: string): Promise<void>;
  has(leaseId: string): boolean;
  /** The lease's browser and context (the CDP relay and the viewer work on them), or null. */
  browserOf(leaseId: string): { browser: EnvBrowser; contextId: string } | null;
  shutdown(): Promise<void>;
}
