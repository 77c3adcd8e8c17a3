import { expect } from 'chai';
import { classify, type ClassifyRequest } from '../../../policy-engine/classify/index.js';
import { hasDuplicateKeys } from '../../../policy-engine/classify/http.js';

/**
 * Issue 9, hole 5: requests the classifier once read as less than they are. Each row is a
 * way an agent could dress a dangerous request as a harmless one; the classifier must take
 * the dangerous reading.
 */
type Row = [label: string, req: Partial<ClassifyRequest> & Pick<ClassifyRequest, 'method' | 'path'>, want: [category: string, rule: string]];

function run(rows: Row[], host: string, hint: string): void {
  for (const [label, req, want] of rows) {
    it(`${label} → ${want[0]} (${want[1]})`, () => {
      const c = classify({ host, headers: {}, ...req }, hint);
      expect([c.category, c.rule]).to.deep.equal(want);
    });
  }
}

const U = '/gmail/v1/users/me';
const json = { 'content-type': 'application/json' };

describe('classify fails closed: Gmail label changes and filters (hole 5)', () => {
  run([
    ['modify, body not JSON', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":["TRASH"' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, body JSON but not an object', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '["TRASH"]' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, duplicate addLabelIds (last one harmless)', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":["TRASH"],"addLabelIds":["STARRED"]}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, duplicate key spelled with an escape', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":["TRASH"],"add\\u004cabelIds":[]}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, duplicate key in a nested object', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"x":{"a":1,"a":2},"addLabelIds":[]}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, snake_case add_label_ids', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"add_label_ids":["TRASH"]}' }, ['delete', 'gmail.messages.modify.trash']],
    ['modify, both spellings, TRASH in the snake one', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":["STARRED"],"add_label_ids":["trash"]}' }, ['delete', 'gmail.messages.modify.trash']],
    ['modify, addLabelIds a string', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":"TRASH"}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, a label that is not a string', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":[{"id":"TRASH"}]}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['batchModify, gzip bytes (unreadable)', { method: 'POST', path: `${U}/messages/batchModify`, headers: { ...json, 'content-encoding': 'gzip' }, body: new Uint8Array([0x1f, 0x8b, 8, 0]) }, ['delete', 'gmail.messages.batchModify.unreadable']],
    ['threads modify, duplicate keys', { method: 'POST', path: `${U}/threads/1/modify`, headers: json, body: '{"addLabelIds":["TRASH"],"addLabelIds":[]}' }, ['delete', 'gmail.threads.modify.unreadable']],
    ['modify, a clean harmless body stays a write', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":["STARRED"],"removeLabelIds":["TRASH"]}' }, ['write', 'gmail.write']],
    ['filter, body not JSON', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: 'action=forward' }, ['change_permission', 'gmail.settings.filters.unreadable']],
    ['filter, duplicate action', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"action":{"forward":"evil@x.y"},"action":{}}' }, ['change_permission', 'gmail.settings.filters.unreadable']],
    ['filter, action not an object', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"action":"forward"}' }, ['change_permission', 'gmail.settings.filters.unreadable']],
    // Defence in depth: readings a lenient server might take that JSON.parse does not.
    ['modify, bytes that are not UTF-8 (an overlong "a")', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: Buffer.concat([Buffer.from('{"'), Buffer.from([0xc1, 0xa1]), Buffer.from('ddLabelIds":["TRASH"]}')]) }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, declared gzip (a body we do not inflate)', { method: 'POST', path: `${U}/messages/1/modify`, headers: { ...json, 'content-encoding': 'gzip' }, body: '{"addLabelIds":[]}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, Content-Encoding: identity is still read', { method: 'POST', path: `${U}/messages/1/modify`, headers: { ...json, 'content-encoding': 'identity' }, body: '{"addLabelIds":["STARRED"]}' }, ['write', 'gmail.write']],
    ['modify, AddLabelIds in another case', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"AddLabelIds":["TRASH"]}' }, ['delete', 'gmail.messages.modify.trash']],
    ['modify, a label padded: " TRASH"', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":[" TRASH"]}' }, ['delete', 'gmail.messages.modify.trash']],
    ['modify, addLabelIds=TRASH in the query', { method: 'POST', path: `${U}/messages/1/modify?addLabelIds=TRASH`, headers: json, body: '{}' }, ['delete', 'gmail.messages.modify.trash']],
    ['modify, addLabelIds null', { method: 'POST', path: `${U}/messages/1/modify`, headers: json, body: '{"addLabelIds":null}' }, ['delete', 'gmail.messages.modify.unreadable']],
    ['modify, no body at all', { method: 'POST', path: `${U}/messages/1/modify` }, ['delete', 'gmail.messages.modify.unreadable']],
    ['batchModify, a clean body stays a write', { method: 'POST', path: `${U}/messages/batchModify`, headers: json, body: Buffer.from('{"ids":["1","2"],"addLabelIds":["Label_7"]}') }, ['write', 'gmail.write']],
    ['filter, forward null', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"action":{"forward":null}}' }, ['change_permission', 'gmail.settings.filters.unreadable']],
    ['filter, action null', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"criteria":{"from":"a"},"action":null}' }, ['change_permission', 'gmail.settings.filters.unreadable']],
    ['filter, Forward in another case', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"action":{"Forward":"evil@x.y"}}' }, ['change_permission', 'gmail.settings.filters.forward']],
    ['filter, no body at all', { method: 'POST', path: `${U}/settings/filters` }, ['change_permission', 'gmail.settings.filters.unreadable']],
    ['filter, trashes matching mail as it arrives', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"criteria":{"from":"no-reply@accounts.google.com"},"action":{"addLabelIds":["TRASH"],"removeLabelIds":["INBOX"]}}' }, ['delete', 'gmail.settings.filters.trash']],
    ['filter, forwards and trashes: the more dangerous (forward) wins', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"action":{"forward":"evil@x.y","addLabelIds":["TRASH"]}}' }, ['change_permission', 'gmail.settings.filters.forward']],
    ['filter, empty forward and labels only stays a write', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"action":{"forward":"","addLabelIds":["Label_1"]}}' }, ['write', 'gmail.write']],
    ['filter, labels only stays a write', { method: 'POST', path: `${U}/settings/filters`, headers: json, body: '{"criteria":{"from":"a"},"action":{"addLabelIds":["L"]}}' }, ['write', 'gmail.write']],
  ], 'gmail.googleapis.com', 'gmail');
});

function batch(boundary: string, parts: string[]): string {
  return [...parts.flatMap((p) => [`--${boundary}`, 'Content-Type: application/http', '', ...p.split('\n')]), `--${boundary}--`, ''].join('\r\n');
}

describe('classify fails closed: Google batches (hole 5)', () => {
  const del = `DELETE ${U}/messages/1`;
  const read = `GET ${U}/messages/2`;
  run([
    ['POST batch with X-HTTP-Method-Override: GET hiding a delete', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b', 'x-http-method-override': 'GET' }, body: batch('b', [read, del]) }, ['delete', 'google.batch(gmail.messages.delete)']],
    ['POST media upload of a Gmail send with X-HTTP-Method-Override: GET (the upload front end may ignore it; a fourth review)', { method: 'POST', host: 'gmail.googleapis.com', path: '/upload/gmail/v1/users/me/messages/send?uploadType=media', headers: { 'content-type': 'message/rfc822', 'x-http-method-override': 'GET' }, body: 'To: a@example.com\r\n\r\nx' }, ['send', 'gmail.messages.send']],
    ['GET batch with a body hiding a delete', { method: 'GET', path: '/batch', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: batch('b', [del]) }, ['delete', 'google.batch(gmail.messages.delete)']],
    ['two boundary parameters (a server may split on either)', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=a; boundary=b' }, body: batch('a', [read]) + batch('b', [del]) }, ['change_permission', 'google.batch.unparsable']],
    ['two equal boundary parameters', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=a; Boundary="a"' }, body: batch('a', [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['a part with two Content-Types', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=a' }, body: `--a\r\nContent-Type: application/http\r\nContent-Type: text/plain\r\n\r\n${read}\r\n--a--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    // More of what a server might read differently from us.
    ['boundary parameters in other cases (Boundary=, BOUNDARY=)', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; Boundary=a; BOUNDARY=b' }, body: batch('a', [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['an RFC 2231 boundary* next to boundary=', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': "multipart/mixed; boundary=a; boundary*=utf-8''b" }, body: batch('a', [read]) + batch('b', [del]) }, ['change_permission', 'google.batch.unparsable']],
    ['a quoted boundary holding ";boundary=" is one parameter, and outside RFC 2046', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary="a;boundary=b"' }, body: batch('a;boundary=b', [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['a backslash-escaped quoted boundary', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary="a\\"b"' }, body: batch('a', [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['a parameter without a value', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=a; b' }, body: batch('a', [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['a boundary longer than 70 characters', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': `multipart/mixed; boundary=${'x'.repeat(71)}` }, body: batch('x'.repeat(71), [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['a delimiter after a lone CR (a part only a CR-splitting parser sees)', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: `--b\r\nContent-Type: application/http\r\n\r\n${read}\r--b\r\nContent-Type: application/http\r\n\r\n${del}\r\n--b--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    ['a close delimiter padded with NBSP, parts after it', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: `--b\r\nContent-Type: application/http\r\n\r\n${read}\r\n--b--\xa0\r\n--b\r\nContent-Type: application/http\r\n\r\n${del}\r\n--b--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    ['parts in the epilogue after the close delimiter', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: batch('b', [read]) + batch('b', [del]) }, ['change_permission', 'google.batch.unparsable']],
    ['the boundary in another case (a case-blind parser splits there)', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: `--b\r\nContent-Type: application/http\r\n\r\n${read}\r\n--B\r\nContent-Type: application/http\r\n\r\n${del}\r\n--b--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    ['the boundary inside a part body', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: batch('b', [`POST ${U}/messages/1/modify\nContent-Type: application/json\n\n{"x":"--b"}`]) }, ['change_permission', 'google.batch.unparsable']],
    ['a folded part header', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: `--b\r\nContent-Type: text/plain\r\n Content-Type: application/http\r\n\r\n${del}\r\n--b--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    ['a part header name with a space before the colon', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: `--b\r\nContent-Type : text/plain\r\n\r\n${del}\r\n--b--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    ['two Content-Transfer-Encodings on a part', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: `--b\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-Transfer-Encoding: base64\r\n\r\n${read}\r\n--b--\r\n` }, ['change_permission', 'google.batch.unparsable']],
    ['an inner request with two Content-Encodings', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: batch('b', [`POST ${U}/messages/1/modify\nContent-Encoding: identity\nContent-Encoding: gzip\n\n{}`]) }, ['change_permission', 'google.batch.unparsable']],
    ['a compressed batch (Content-Encoding: gzip)', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b', 'content-encoding': 'gzip' }, body: batch('b', [read]) }, ['change_permission', 'google.batch.unparsable']],
    ['an inner label change with duplicate keys', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: batch('b', [read, `POST ${U}/messages/1/modify\nContent-Type: application/json\n\n{"addLabelIds":["TRASH"],"addLabelIds":[]}`]) }, ['delete', 'google.batch(gmail.messages.modify.unreadable)']],
    ['an inner label change in non-UTF-8 bytes', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=b' }, body: Buffer.concat([Buffer.from(`--b\r\nContent-Type: application/http\r\n\r\nPOST ${U}/messages/1/modify\r\n\r\n{"x":"`), Buffer.from([0xff]), Buffer.from('"}\r\n--b--\r\n')]) }, ['delete', 'google.batch(gmail.messages.modify.unreadable)']],
    ['still read: a boundary of dashes, which overlaps its own close delimiter (found by the property test)', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary=-' }, body: batch('-', [read]) }, ['read', 'google.batch(gmail.read)']],
    ['still read: padding with spaces and tabs after delimiters, a quoted boundary, LF lines', { method: 'POST', path: '/batch/gmail/v1', headers: { 'content-type': 'multipart/mixed; boundary="=_b 1"' }, body: `preamble\n--=_b 1 \t\nContent-Type: application/http\n\n${read}\n--=_b 1--\t\nepilogue\n` }, ['read', 'google.batch(gmail.read)']],
  ], 'www.googleapis.com', 'gmail');
});

describe('classify: Stripe money movement and access (hole 5)', () => {
  const S = 'secret:STRIPE_KEY';
  const pay: Array<[string, string]> = [
    ['/v1/subscriptions', 'stripe.subscriptions'], ['/v1/subscriptions/sub_1', 'stripe.subscriptions.update'], ['/v1/subscriptions/sub_1/resume', 'stripe.subscriptions.resume'],
    ['/v1/subscription_items', 'stripe.subscription_items'], ['/v1/subscription_items/si_1', 'stripe.subscription_items.update'],
    ['/v1/subscription_schedules', 'stripe.subscription_schedules'], ['/v1/invoices/in_1/pay', 'stripe.invoices.pay'], ['/v1/invoices/in_1/finalize', 'stripe.invoices.finalize'],
    ['/v1/credit_notes', 'stripe.credit_notes'], ['/v1/quotes/qt_1/accept', 'stripe.quotes.accept'], ['/v1/customers/cus_1/balance_transactions', 'stripe.customers.balance_transactions'],
    ['/v1/payment_intents/pi_1/apply_customer_balance', 'stripe.payment_intents.apply_customer_balance'], ['/v1/application_fees/fee_1/refunds', 'stripe.application_fees.refunds'],
    ['/v1/disputes/dp_1/close', 'stripe.disputes.close'], ['/v1/accounts/acct_1/external_accounts', 'stripe.accounts.external_accounts'],
    ['/v1/issuing/cards', 'stripe.issuing.cards'], ['/v1/issuing/authorizations/iauth_1/approve', 'stripe.issuing.authorizations.approve'],
    ['/v1/billing/credit_grants', 'stripe.billing.credit_grants'], ['/v2/money_management/outbound_payments', 'stripe.v2.outbound_payments'],
    ['/v2/money_management/outbound_transfers', 'stripe.v2.outbound_transfers'], ['/V1/Subscriptions', 'stripe.subscriptions'], ['/v1//subscriptions/', 'stripe.subscriptions'],
    // second pass of the audit
    ['/v1/invoices', 'stripe.invoices'], ['/v1/invoices/in_1', 'stripe.invoices.update'], ['/v1/invoices/in_1/add_lines', 'stripe.invoices.lines'],
    ['/v1/invoices/in_1/update_lines', 'stripe.invoices.lines'], ['/v1/invoices/in_1/remove_lines', 'stripe.invoices.lines'], ['/v1/invoices/in_1/lines/il_1', 'stripe.invoices.lines'],
    ['/v1/invoiceitems', 'stripe.invoiceitems'], ['/v1/invoiceitems/ii_1', 'stripe.invoiceitems'], ['/v1/subscription_items/si_1/usage_records', 'stripe.subscription_items.usage_records'],
    ['/v1/customers/cus_1/subscriptions', 'stripe.customers.subscriptions'], ['/v1/customers/cus_1/subscriptions/sub_1', 'stripe.customers.subscriptions'],
    ['/v1/payment_intents/pi_1/verify_microdeposits', 'stripe.payment_intents.verify_microdeposits'], ['/v1/charges/ch_1/dispute/close', 'stripe.charges.dispute.close'],
    ['/v1/accounts/acct_1/bank_accounts', 'stripe.accounts.bank_accounts'], ['/v1/accounts/acct_1/bank_accounts/ba_1', 'stripe.accounts.bank_accounts'],
    ['/v1/issuing/cardholders', 'stripe.issuing.cardholders'], ['/v1/issuing/cardholders/ich_1', 'stripe.issuing.cardholders'], ['/v1/issuing/tokens/intok_1', 'stripe.issuing.tokens'],
    ['/v1/billing/meter_events', 'stripe.billing.meter_events'], ['/v1/billing/meter_event_adjustments', 'stripe.billing.meter_event_adjustments'],
    ['/v2/billing/meter_events', 'stripe.v2.meter_events'], ['/v2/billing/meter_event_adjustments', 'stripe.v2.meter_event_adjustments'], ['/v2/billing/meter_event_stream', 'stripe.v2.meter_event_stream'],
    ['/v1/treasury/credit_reversals', 'stripe.treasury.credit_reversals'], ['/v1/treasury/debit_reversals', 'stripe.treasury.debit_reversals'],
    ['/v2/money_management/inbound_transfers', 'stripe.v2.inbound_transfers'], ['/v2/money_management/payout_intents', 'stripe.v2.payout_intents'],
    ['/v2/money_management/payout_intents/pi_1', 'stripe.v2.payout_intents.update'], ['/v2/money_management/payout_intents/pi_1/confirm', 'stripe.v2.payout_intents.confirm'],
    ['/v2/money_management/outbound_setup_intents', 'stripe.v2.outbound_setup_intents'], ['/v2/money_management/outbound_setup_intents/osi_1', 'stripe.v2.outbound_setup_intents.update'],
    ['/v2/core/vault/us_bank_accounts', 'stripe.v2.vault.us_bank_accounts'], ['/v2/core/vault/us_bank_accounts/usba_1', 'stripe.v2.vault.us_bank_accounts.update'],
    ['/v2/core/vault/gb_bank_accounts', 'stripe.v2.vault.gb_bank_accounts'], ['/v1/terminal/readers/tmr_1/confirm_payment_intent', 'stripe.terminal.readers.confirm_payment_intent'],
    ['/v1/terminal/readers/tmr_1/refund_payment', 'stripe.terminal.readers.refund_payment'], ['/v1/forwarding/requests', 'stripe.forwarding.requests'], ['/v1/climate/orders', 'stripe.climate.orders'],
  ];
  run(pay.map(([path, rule]): Row => [`POST ${path}`, { method: 'POST', path }, ['pay', rule]]), 'api.stripe.com', S);
  run([
    ['POST /v1/webhook_endpoints', { method: 'POST', path: '/v1/webhook_endpoints' }, ['change_permission', 'stripe.webhook_endpoints']],
    ['POST /v1/ephemeral_keys', { method: 'POST', path: '/v1/ephemeral_keys' }, ['change_permission', 'stripe.ephemeral_keys']],
    ['POST /v1/accounts/acct_1/login_links', { method: 'POST', path: '/v1/accounts/acct_1/login_links' }, ['change_permission', 'stripe.accounts.login_links']],
    ['POST /v1/accounts/acct_1 naming an external_account', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'external_account[account_number]=000123456789' }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/accounts/acct_1, body announced but not seen', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '52' } }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/accounts/acct_1, body chunked and not seen', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'transfer-encoding': 'chunked' } }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/accounts/acct_1, no body at all', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-length': '0' } }, ['write', 'stripe.write']],
    ['POST /v1/accounts/acct_1, external_account spelled %65xternal_account', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '%65xternal_account=btok_1' }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/accounts/acct_1, external_account in the query', { method: 'POST', path: '/v1/accounts/acct_1?external_account=btok_1' }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/accounts/acct_1, a JSON body (not a form: no single reading)', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-type': 'application/json' }, body: '{"metadata":{}}' }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/accounts/acct_1, gzip', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' }, body: 'metadata[a]=1' }, ['pay', 'stripe.accounts.update.external_account']],
    ['POST /v1/customers with balance', { method: 'POST', path: '/v1/customers', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'email=a%40b.c&balance=-500000' }, ['pay', 'stripe.customers.balance']],
    ['POST /v1/customers/cus_1 with balance spelled b%61lance', { method: 'POST', path: '/v1/customers/cus_1', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'b%61lance=-500000' }, ['pay', 'stripe.customers.balance']],
    ['POST /v1/customers/cus_1, body announced but not seen', { method: 'POST', path: '/v1/customers/cus_1', headers: { 'content-length': '20' } }, ['pay', 'stripe.customers.balance']],
    ['POST /v1/customers with name and email stays a write', { method: 'POST', path: '/v1/customers', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'name=Ada&email=a%40b.c&metadata[balance]=x' }, ['write', 'stripe.write']],
    ['POST /v1/customers/cus_1/cash_balance stays what main made it (pay)', { method: 'POST', path: '/v1/customers/cus_1/cash_balance' }, ['pay', 'stripe.customers.cash_balance_transfer']],
    ['POST /v1/invoices/create_preview only previews', { method: 'POST', path: '/v1/invoices/create_preview' }, ['write', 'stripe.write']],
    ['POST /v1/invoices/in_1/void stops money: a write', { method: 'POST', path: '/v1/invoices/in_1/void' }, ['write', 'stripe.write']],
    ['POST /v1/subscription_schedules/ss_1/release stops nothing new: a write', { method: 'POST', path: '/v1/subscription_schedules/ss_1/release' }, ['write', 'stripe.write']],
    ['DELETE /v1/webhook_endpoints/we_1 stays a write', { method: 'DELETE', path: '/v1/webhook_endpoints/we_1' }, ['write', 'stripe.write']],
    ['POST /v1/billing/meter_events with X-HTTP-Method-Override: GET (Stripe ignores it)', { method: 'POST', path: '/v1/billing/meter_events', headers: { 'x-http-method-override': 'GET' } }, ['pay', 'stripe.billing.meter_events']],
    ['POST /v1/accounts/acct_1 with metadata only', { method: 'POST', path: '/v1/accounts/acct_1', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'metadata[a]=1' }, ['write', 'stripe.write']],
    ['POST /v1/invoices/in_1/send', { method: 'POST', path: '/v1/invoices/in_1/send' }, ['send', 'stripe.invoices.send']],
    ['POST /v1/file_links', { method: 'POST', path: '/v1/file_links' }, ['change_permission', 'stripe.file_links']],
    ['POST /v1/file_links/link_1 (extend the expiry)', { method: 'POST', path: '/v1/file_links/link_1' }, ['change_permission', 'stripe.file_links']],
    ['POST /v1/apps/installs', { method: 'POST', path: '/v1/apps/installs' }, ['change_permission', 'stripe.apps.installs']],
    ['POST /v1/apps/installs/inst_1 (reauthorize)', { method: 'POST', path: '/v1/apps/installs/inst_1' }, ['change_permission', 'stripe.apps.installs.reauthorize']],
    ['POST /v2/core/account_links', { method: 'POST', path: '/v2/core/account_links' }, ['change_permission', 'stripe.v2.account_links']],
    ['POST /v2/billing/meter_event_session', { method: 'POST', path: '/v2/billing/meter_event_session' }, ['change_permission', 'stripe.v2.meter_event_session']],
    ['DELETE /v1/subscriptions/sub_1 (cancel) stays a write', { method: 'DELETE', path: '/v1/subscriptions/sub_1' }, ['write', 'stripe.write']],
    ['GET /v1/subscriptions stays a read', { method: 'GET', path: '/v1/subscriptions' }, ['read', 'stripe.read']],
  ], 'api.stripe.com', S);
});

describe('hasDuplicateKeys (policy-engine/classify/http)', () => {
  for (const [text, want] of [['{"a":1,"b":{"a":2}}', false], ['{"a":1,"a":1}', true], ['[{"a":1},{"a":1}]', false], ['{"a":"\\"a\\":","a":2}', true], ['{"k\\u0065y":1,"key":2}', true], ['{"a":{"b":[1,{"c":1,"c":2}]}}', true], ['"just a string"', false]] as const) {
    it(`${text} → ${want}`, () => expect(hasDuplicateKeys(text)).to.equal(want));
  }
});
