/**
 * Stripe API (host api.stripe.com; used with `secret:` connectors holding a Stripe key).
 * Stripe creates and updates with POST and ignores X-HTTP-Method-Override, so the wire
 * method and any override are both classified and the more dangerous wins.
 * Reference: https://docs.stripe.com/api
 */
import { methodRule } from './generic.js';
import { bodyTextStrict, fieldKey } from './http.js';
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
  // Issue 9, second pass over the reference (every POST of stripe-node 23.1.0, OpenAPI
  // v2596, and the legacy paths Stripe still serves): more of what charges, pays out or
  // decides where money goes.
  // Invoices: create and update can set auto_advance (finalized, then charged, an hour
  // later); lines change what finalize charges. (void, mark_uncollectible stay writes:
  // they stop money, like a cancellation.)
  { rule: 'stripe.invoices', methods: 'POST', path: ['v1', 'invoices'], category: 'pay' },
  { rule: 'stripe.invoices.update', methods: 'POST', path: ['v1', 'invoices', '*'], category: 'pay', when: (p) => p.lower[2] !== 'create_preview' },
  { rule: 'stripe.invoices.lines', methods: 'POST', path: ['v1', 'invoices', '*', 'add_lines'], category: 'pay' },
  { rule: 'stripe.invoices.lines', methods: 'POST', path: ['v1', 'invoices', '*', 'update_lines'], category: 'pay' },
  { rule: 'stripe.invoices.lines', methods: 'POST', path: ['v1', 'invoices', '*', 'remove_lines'], category: 'pay' },
  { rule: 'stripe.invoices.lines', methods: 'POST', path: ['v1', 'invoices', '*', 'lines', '*'], category: 'pay' },
  { rule: 'stripe.invoiceitems', methods: 'POST', path: ['v1', 'invoiceitems', '**'], category: 'pay' }, // charged with the next invoice
  { rule: 'stripe.subscription_items.usage_records', methods: 'POST', path: ['v1', 'subscription_items', '*', 'usage_records'], category: 'pay' }, // legacy metered usage
  { rule: 'stripe.customers.subscriptions', methods: 'POST', path: ['v1', 'customers', '*', 'subscriptions', '**'], category: 'pay' }, // legacy form of /v1/subscriptions
  // `balance` on a customer sets the credit the next invoices draw on (body read; fail closed).
  { rule: 'stripe.customers.balance', methods: 'POST', path: ['v1', 'customers'], category: 'pay', when: setsCustomerBalance },
  { rule: 'stripe.customers.balance', methods: 'POST', path: ['v1', 'customers', '*'], category: 'pay', when: setsCustomerBalance },
  { rule: 'stripe.payment_intents.verify_microdeposits', methods: 'POST', path: ['v1', 'payment_intents', '*', 'verify_microdeposits'], category: 'pay' }, // completes a bank debit
  { rule: 'stripe.charges.dispute.close', methods: 'POST', path: ['v1', 'charges', '*', 'dispute', 'close'], category: 'pay' }, // legacy form of disputes.close
  { rule: 'stripe.accounts.bank_accounts', methods: 'POST', path: ['v1', 'accounts', '*', 'bank_accounts', '**'], category: 'pay' }, // legacy alias of external_accounts
  // Issuing: a cardholder's spending_controls bound every card it holds; an active wallet token spends.
  { rule: 'stripe.issuing.cardholders', methods: 'POST', path: ['v1', 'issuing', 'cardholders', '**'], category: 'pay' },
  { rule: 'stripe.issuing.tokens', methods: 'POST', path: ['v1', 'issuing', 'tokens', '**'], category: 'pay' },
  // Usage-based billing: reported usage is what the customer is charged.
  { rule: 'stripe.billing.meter_events', methods: 'POST', path: ['v1', 'billing', 'meter_events'], category: 'pay' },
  { rule: 'stripe.billing.meter_event_adjustments', methods: 'POST', path: ['v1', 'billing', 'meter_event_adjustments'], category: 'pay' },
  { rule: 'stripe.v2.meter_events', methods: 'POST', path: ['v2', 'billing', 'meter_events'], category: 'pay' },
  { rule: 'stripe.v2.meter_event_adjustments', methods: 'POST', path: ['v2', 'billing', 'meter_event_adjustments'], category: 'pay' },
  { rule: 'stripe.v2.meter_event_stream', methods: 'POST', path: ['v2', 'billing', 'meter_event_stream'], category: 'pay' },
  // Treasury and Money Management.
  { rule: 'stripe.treasury.credit_reversals', methods: 'POST', path: ['v1', 'treasury', 'credit_reversals'], category: 'pay' },
  { rule: 'stripe.treasury.debit_reversals', methods: 'POST', path: ['v1', 'treasury', 'debit_reversals'], category: 'pay' },
  { rule: 'stripe.v2.inbound_transfers', methods: 'POST', path: ['v2', 'money_management', 'inbound_transfers'], category: 'pay' },
  { rule: 'stripe.v2.payout_intents', methods: 'POST', path: ['v2', 'money_management', 'payout_intents'], category: 'pay' },
  { rule: 'stripe.v2.payout_intents.update', methods: 'POST', path: ['v2', 'money_management', 'payout_intents', '*'], category: 'pay' },
  { rule: 'stripe.v2.payout_intents.confirm', methods: 'POST', path: ['v2', 'money_management', 'payout_intents', '*', 'confirm'], category: 'pay' },
  // Where outbound payments go: a recipient's payout method.
  { rule: 'stripe.v2.outbound_setup_intents', methods: 'POST', path: ['v2', 'money_management', 'outbound_setup_intents'], category: 'pay' },
  { rule: 'stripe.v2.outbound_setup_intents.update', methods: 'POST', path: ['v2', 'money_management', 'outbound_setup_intents', '*'], category: 'pay' },
  { rule: 'stripe.v2.vault.us_bank_accounts', methods: 'POST', path: ['v2', 'core', 'vault', 'us_bank_accounts'], category: 'pay' },
  { rule: 'stripe.v2.vault.us_bank_accounts.update', methods: 'POST', path: ['v2', 'core', 'vault', 'us_bank_accounts', '*'], category: 'pay' },
  { rule: 'stripe.v2.vault.gb_bank_accounts', methods: 'POST', path: ['v2', 'core', 'vault', 'gb_bank_accounts'], category: 'pay' },
  // Card present: money moves once a card is tapped.
  { rule: 'stripe.terminal.readers.confirm_payment_intent', methods: 'POST', path: ['v1', 'terminal', 'readers', '*', 'confirm_payment_intent'], category: 'pay' },
  { rule: 'stripe.terminal.readers.refund_payment', methods: 'POST', path: ['v1', 'terminal', 'readers', '*', 'refund_payment'], category: 'pay' },
  { rule: 'stripe.forwarding.requests', methods: 'POST', path: ['v1', 'forwarding', 'requests'], category: 'pay' }, // stored card details to another processor, to charge them
  { rule: 'stripe.climate.orders', methods: 'POST', path: ['v1', 'climate', 'orders'], category: 'pay' }, // buys carbon removal with the account's balance
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
  // Second pass: a public URL to a file (identity documents, dispute evidence); installing
  // or reauthorising an app grants it the permissions it asks; v2 onboarding links; a
  // token for the meter event stream.
  { rule: 'stripe.file_links', methods: 'POST', path: ['v1', 'file_links', '**'], category: 'change_permission' },
  { rule: 'stripe.apps.installs', methods: 'POST', path: ['v1', 'apps', 'installs'], category: 'change_permission' },
  { rule: 'stripe.apps.installs.reauthorize', methods: 'POST', path: ['v1', 'apps', 'installs', '*'], category: 'change_permission' },
  { rule: 'stripe.v2.account_links', methods: 'POST', path: ['v2', 'core', 'account_links'], category: 'change_permission' },
  { rule: 'stripe.v2.meter_event_session', methods: 'POST', path: ['v2', 'billing', 'meter_event_session'], category: 'change_permission' },
];

/**
 * The parameter names of a form request (query and body, decoded), or null when the body
 * has no single reading: not passed, a Content-Encoding, bytes that are not UTF-8, or a
 * non-empty body that is not a form (Stripe's v1 API takes forms).
 */
function formNames(p: ParsedRequest): string[] | null {
  const text = bodyTextStrict(p.body, p.headers);
  if (text === undefined) return null;
  const ct = (p.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (text.trim() !== '' && ct !== '' && ct !== 'application/x-www-form-urlencoded') return null;
  return [...p.query.keys(), ...new URLSearchParams(text).keys()];
}

/** `external_account[number]` → `externalaccount` (fieldKey of the part before any bracket). */
const topName = (name: string): string => fieldKey(name.split('[')[0]!);

/**
 * An account update that names where payouts go (`external_account`, any bracketed form).
 * Without a single reading of the body it must be assumed to (fail closed).
 */
function setsExternalAccount(p: ParsedRequest): boolean {
  const names = formNames(p);
  return names === null || names.some((n) => topName(n).startsWith('externalaccount'));
}

/**
 * A customer create or update that sets `balance`: the credit the customer's next
 * invoices draw on, money the account is then not paid. Fail closed as above.
 */
function setsCustomerBalance(p: ParsedRequest): boolean {
  const names = formNames(p);
  return names === null || names.some((n) => topName(n) === 'balance');
}

/** Requests whose row depends on the form body: customer create/update, account update. */
export function stripeNeedsBody(p: ParsedRequest): boolean {
  if (![p.method, ...p.overrides].includes('POST')) return false;
  const l = p.lower;
  if (l[0] !== 'v1') return false;
  if (l[1] === 'customers') return l.length === 2 || l.length === 3;
  return l[1] === 'accounts' && l.length === 3;
}

export const STRIPE_HOST = 'api.stripe.com';

export function classifyStripe(p: ParsedRequest, method: string): Verdict {
  return matchRows(STRIPE_ROWS, p, method, p.lower) ?? methodRule(method, 'stripe');
}
