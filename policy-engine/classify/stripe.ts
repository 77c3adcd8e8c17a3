/**
 * Stripe API (host api.stripe.com; used with `secret:` connectors holding a Stripe key).
 * Stripe creates and updates with POST and ignores X-HTTP-Method-Override, so the wire
 * method and any override are both classified and the more dangerous wins.
 * Reference: https://docs.stripe.com/api
 */
import { methodRule } from './generic.js';
import { bodyText } from './http.js';
import { matchRows } from './rows.js';
import type { Row } from './rows.js';
import type { ParsedRequest, Verdict } from './types.js';

/** Every row moves money. Paths are the full path (`v1/...`). */
export const STRIPE_ROWS: readonly Row[] = [
  { rule: 'stripe.charges', methods: 'POST', path: ['v1', 'charges'], category: 'pay' },
  { rule: 'stripe.payment_intents', methods: 'POST', path: ['v1', 'payment_intents'], category: 'pay' },
  { rule: 'stripe.payment_intents.confirm', methods: 'POST', path: ['v1', 'payment_intents', '*', 'confirm'], category: 'pay' },
  { rule: 'stripe.payouts', methods: 'POST', path: ['v1', 'payouts'], category: 'pay' },
  { rule: 'stripe.transfers', methods: 'POST', path: ['v1', 'transfers'], category: 'pay' },
  { rule: 'stripe.refunds', methods: 'POST', path: ['v1', 'refunds'], category: 'pay' },
  // Same meaning, not in the brief's list:
  { rule: 'stripe.payment_intents.capture', methods: 'POST', path: ['v1', 'payment_intents', '*', 'capture'], category: 'pay' },
  { rule: 'stripe.payment_intents.increment_authorization', methods: 'POST', path: ['v1', 'payment_intents', '*', 'increment_authorization'], category: 'pay' },
  { rule: 'stripe.charges.capture', methods: 'POST', path: ['v1', 'charges', '*', 'capture'], category: 'pay' },
  { rule: 'stripe.charges.refund', methods: 'POST', path: ['v1', 'charges', '*', 'refund'], category: 'pay' },
  { rule: 'stripe.charges.refunds', methods: 'POST', path: ['v1', 'charges', '*', 'refunds'], category: 'pay' },
  { rule: 'stripe.invoices.pay', methods: 'POST', path: ['v1', 'invoices', '*', 'pay'], category: 'pay' },
  { rule: 'stripe.payouts.reverse', methods: 'POST', path: ['v1', 'payouts', '*', 'reverse'], category: 'pay' },
  { rule: 'stripe.transfers.reversals', methods: 'POST', path: ['v1', 'transfers', '*', 'reversals'], category: 'pay' },
  { rule: 'stripe.topups', methods: 'POST', path: ['v1', 'topups'], category: 'pay' },
  { rule: 'stripe.treasury.outbound_payments', methods: 'POST', path: ['v1', 'treasury', 'outbound_payments'], category: 'pay' },
  { rule: 'stripe.treasury.outbound_transfers', methods: 'POST', path: ['v1', 'treasury', 'outbound_transfers'], category: 'pay' },
  // Issue 9, hole 5 (audited against https://docs.stripe.com/api): what commits the account
  // to charging, paying out, refunding or moving money.
  { rule: 'stripe.subscriptions', methods: 'POST', path: ['v1', 'subscriptions'], category: 'pay' },
  { rule: 'stripe.subscriptions.update', methods: 'POST', path: ['v1', 'subscriptions', '*'], category: 'pay' },
  { rule: 'stripe.subscriptions.resume', methods: 'POST', path: ['v1', 'subscriptions', '*', 'resume'], category: 'pay' },
  { rule: 'stripe.subscription_items', methods: 'POST', path: ['v1', 'subscription_items'], category: 'pay' },
  { rule: 'stripe.subscription_items.update', methods: 'POST', path: ['v1', 'subscription_items', '*'], category: 'pay' },
  { rule: 'stripe.subscription_schedules', methods: 'POST', path: ['v1', 'subscription_schedules'], category: 'pay' },
  { rule: 'stripe.subscription_schedules.update', methods: 'POST', path: ['v1', 'subscription_schedules', '*'], category: 'pay' },
  { rule: 'stripe.invoices.finalize', methods: 'POST', path: ['v1', 'invoices', '*', 'finalize'], category: 'pay' },
  { rule: 'stripe.credit_notes', methods: 'POST', path: ['v1', 'credit_notes'], category: 'pay' },
  { rule: 'stripe.quotes.accept', methods: 'POST', path: ['v1', 'quotes', '*', 'accept'], category: 'pay' },
  { rule: 'stripe.customers.balance_transactions', methods: 'POST', path: ['v1', 'customers', '*', 'balance_transactions', '**'], category: 'pay' },
  { rule: 'stripe.customers.cash_balance_transfer', methods: 'POST', path: ['v1', 'customers', '*', 'cash_balance', '**'], category: 'pay' },
  { rule: 'stripe.payment_intents.apply_customer_balance', methods: 'POST', path: ['v1', 'payment_intents', '*', 'apply_customer_balance'], category: 'pay' },
  { rule: 'stripe.application_fees.refunds', methods: 'POST', path: ['v1', 'application_fees', '*', 'refunds', '**'], category: 'pay' },
  { rule: 'stripe.application_fees.refund', methods: 'POST', path: ['v1', 'application_fees', '*', 'refund'], category: 'pay' },
  { rule: 'stripe.disputes.close', methods: 'POST', path: ['v1', 'disputes', '*', 'close'], category: 'pay' },
  { rule: 'stripe.accounts.external_accounts', methods: 'POST', path: ['v1', 'accounts', '*', 'external_accounts', '**'], category: 'pay' },
  { rule: 'stripe.accounts.update.external_account', methods: 'POST', path: ['v1', 'accounts', '*'], category: 'pay', when: setsExternalAccount },
  { rule: 'stripe.issuing.cards', methods: 'POST', path: ['v1', 'issuing', 'cards', '**'], category: 'pay' },
  { rule: 'stripe.issuing.authorizations.approve', methods: 'POST', path: ['v1', 'issuing', 'authorizations', '*', 'approve'], category: 'pay' },
  { rule: 'stripe.billing.credit_grants', methods: 'POST', path: ['v1', 'billing', 'credit_grants'], category: 'pay' },
  { rule: 'stripe.treasury.inbound_transfers', methods: 'POST', path: ['v1', 'treasury', 'inbound_transfers'], category: 'pay' },
  { rule: 'stripe.terminal.readers.process_payment_intent', methods: 'POST', path: ['v1', 'terminal', 'readers', '*', 'process_payment_intent'], category: 'pay' },
  { rule: 'stripe.v2.outbound_payments', methods: 'POST', path: ['v2', 'money_management', 'outbound_payments'], category: 'pay' },
  { rule: 'stripe.v2.outbound_transfers', methods: 'POST', path: ['v2', 'money_management', 'outbound_transfers'], category: 'pay' },
  // Sending an invoice mails the customer.
  { rule: 'stripe.invoices.send', methods: 'POST', path: ['v1', 'invoices', '*', 'send'], category: 'send' },
  // What hands out access: a webhook endpoint streams the account's events (customers,
  // payments) to any URL; the rest mint sessions, links or keys for someone else
  // (also refused to swapped secrets outright: minting.ts).
  { rule: 'stripe.webhook_endpoints', methods: 'POST', path: ['v1', 'webhook_endpoints', '**'], category: 'change_permission' },
  { rule: 'stripe.v2.event_destinations', methods: 'POST', path: ['v2', 'core', 'event_destinations', '**'], category: 'change_permission' },
  { rule: 'stripe.ephemeral_keys', methods: 'POST', path: ['v1', 'ephemeral_keys'], category: 'change_permission' },
  { rule: 'stripe.account_links', methods: 'POST', path: ['v1', 'account_links'], category: 'change_permission' },
  { rule: 'stripe.account_sessions', methods: 'POST', path: ['v1', 'account_sessions'], category: 'change_permission' },
  { rule: 'stripe.accounts.login_links', methods: 'POST', path: ['v1', 'accounts', '*', 'login_links'], category: 'change_permission' },
  { rule: 'stripe.customer_sessions', methods: 'POST', path: ['v1', 'customer_sessions'], category: 'change_permission' },
  { rule: 'stripe.billing_portal.sessions', methods: 'POST', path: ['v1', 'billing_portal', 'sessions'], category: 'change_permission' },
  { rule: 'stripe.terminal.connection_tokens', methods: 'POST', path: ['v1', 'terminal', 'connection_tokens'], category: 'change_permission' },
];

/**
 * An account update that names where payouts go (`external_account`, any bracketed form).
 * Without the body it must be assumed to (fail closed).
 */
function setsExternalAccount(p: ParsedRequest): boolean {
  if (p.body === undefined) return true;
  const text = bodyText(p.body, 'latin1') ?? '';
  const ct = (p.contentType ?? '').toLowerCase();
  if (ct.includes('json')) return /external_account/i.test(text);
  for (const pair of text.split('&')) {
    const name = pair.split('=', 1)[0]!;
    let decoded = name;
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      return true;
    }
    if (decoded.toLowerCase().startsWith('external_account')) return true;
  }
  return false;
}

export const STRIPE_HOST = 'api.stripe.com';

export function classifyStripe(p: ParsedRequest, method: string): Verdict {
  return matchRows(STRIPE_ROWS, p, method, p.lower) ?? methodRule(method, 'stripe');
}
