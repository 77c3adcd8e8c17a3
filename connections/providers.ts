/**
 * The two OAuth providers and what the contract fixes about them (service.md "Connection":
 * connector → provider and scopes, exactly these). Endpoints come from config so a local
 * provider can stand in (decisions.md: GOOGLE_AUTH_URL, ...).
 */
export const PROVIDERS = ['google', 'slack'] as const;
export type Provider = (typeof PROVIDERS)[number];

export function isProvider(p: string): p is Provider {
  return (PROVIDERS as readonly string[]).includes(p);
}

export const CONNECTORS = { gmail: 'google', calendar: 'google', slack: 'slack' } as const;
export type Connector = keyof typeof CONNECTORS;

/** Scopes per connector, exactly the contract's table. */
export const CONNECTOR_SCOPES: Readonly<Record<Connector, readonly string[]>> = Object.freeze({
  gmail: ['https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send'],
  calendar: ['https://www.googleapis.com/auth/calendar.events.owned'],
  slack: ['channels:history', 'channels:read', 'groups:history', 'groups:read', 'chat:write', 'search:read'],
});

/** Every Google authorization also asks for these (service.md). */
export const GOOGLE_IDENTITY_SCOPES = ['openid', 'email'] as const;

/** Where a provider's OAuth endpoints are (config: GOOGLE_AUTH_URL, ..., defaulting to the real ones). */
export interface ProviderEndpoints {
  authUrl: string;
  tokenUrl: string;
  revokeUrl: string;
}

/** The platform's own app of a provider (GOOGLE_CLIENT_ID / _SECRET, ...), when configured. */
export interface PlatformApp {
  clientId: string;
  clientSecret: string;
}
