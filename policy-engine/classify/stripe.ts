/**
 * Stripe API (host api.stripe.com; used with `secret:` connectors holding a Stripe key).
 * Stripe creates and updates with POST and ignores X-HTTP-Method-Override, so the wire
 * method and any override are both classified and the more dangerous wins.
 * Reference: https://docs.stripe.com/api
 */
import { methodRule } from './generic.js';
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
];

export const STRIPE_HOST = 'api.stripe.com';

export function classifyStripe(p: ParsedRequest, method: string): Verdict {
  return matchRows(STRIPE_ROWS, p, method, p.lower) ?? methodRule(method, 'stripe');
}
