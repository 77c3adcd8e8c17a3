import { newId } from '../lib/ids.js';

/** The webhook event envelope of service.md, field order as the spec lists it. */
export interface WebhookEnvelope {
  id: string;
  type: string;
  /** RFC 3339 UTC with milliseconds. */
  created: string;
  /** null for events that belong to no environment (connection.*). */
  environment_id: string | null;
  data: Record<string, unknown>;
}

export function newEventId(): string {
  return newId('evt');
}

/**
 * Builds an envelope and the exact JSON text that is sent. The text is built once, when
 * the event is queued, and stored: every retry sends the same bytes with the same id, so
 * a signature over it and a receiver's duplicate check keep working.
 */
export function buildEnvelope(e: {
  id?: string;
  type: string;
  createdAtMs: number;
  environmentId: string | null;
  data: Record<string, unknown>;
}): { envelope: WebhookEnvelope; body: string } {
  const envelope: WebhookEnvelope = {
    id: e.id ?? newEventId(),
    type: e.type,
    created: new Date(e.createdAtMs).toISOString(),
    environment_id: e.environmentId,
    data: e.data,
  };
  return { envelope, body: JSON.stringify(envelope) };
}
