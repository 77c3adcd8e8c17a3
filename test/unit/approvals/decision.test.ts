/**
 * The decision body parser (approvals/decision.ts): table-driven, every 400 of the spec
 * that does not need the approval itself.
 */
import { expect } from 'chai';
import { parseDecision, scopeOf, MAX_UNTIL_SECS } from '../../../approvals/decision.js';
import { summaryOf, effectiveStatus } from '../../../approvals/approvals.service.js';
import { ServiceError } from '../../../lib/errors.js';

function codeOf(body: unknown): string {
  try {
    parseDecision(body);
    return 'ok';
  } catch (err) {
    if (err instanceof ServiceError) return err.code;
    throw err;
  }
}

describe('parseDecision', () => {
  const ok: Array<[unknown, unknown]> = [
    [{ decision: 'deny' }, { decision: 'deny' }],
    [{ decision: 'deny', scope: null }, { decision: 'deny' }],
    [{ decision: 'approve', scope: { kind: 'once' } }, { decision: 'approve', scope: { kind: 'once' } }],
    [{ decision: 'approve', scope: { kind: 'permanent' } }, { decision: 'approve', scope: { kind: 'permanent' } }],
    [{ decision: 'approve', scope: { kind: 'task', task_id: 't' } }, { decision: 'approve', scope: { kind: 'task', task_id: 't' } }],
    [{ decision: 'approve', scope: { kind: 'session', session_id: 's' } }, { decision: 'approve', scope: { kind: 'session', session_id: 's' } }],
    [{ scope: { until: 1900000000, kind: 'until' }, decision: 'approve' }, { decision: 'approve', scope: { kind: 'until', until: 1900000000 } }],
  ];
  for (const [body, want] of ok) {
    it(`accepts ${JSON.stringify(body)}`, () => {
      expect(parseDecision(body)).to.deep.equal(want);
    });
  }

  const errors: Array<[unknown, string]> = [
    [undefined, 'invalid_decision'],
    [null, 'invalid_decision'],
    ['deny', 'invalid_decision'],
    [[], 'invalid_decision'],
    [{}, 'invalid_decision'],
    [{ decision: 'maybe' }, 'invalid_decision'],
    [{ decision: 1 }, 'invalid_decision'],
    [{ decision: 'deny', note: 'x' }, 'invalid_decision'],
    [{ decision: 'deny', scope: { kind: 'once' } }, 'invalid_decision'],
    [{ decision: 'deny', scope: {} }, 'invalid_decision'],
    [{ decision: 'approve' }, 'missing_scope'],
    [{ decision: 'approve', scope: null }, 'missing_scope'],
    [{ decision: 'approve', scope: 'once' }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'ONCE' } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'time_limited', until: 1 } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'toString' } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'once', x: 1 } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'task' } }, 'missing_scope'],
    [{ decision: 'approve', scope: { kind: 'task', task_id: '' } }, 'missing_scope'],
    [{ decision: 'approve', scope: { kind: 'task', task_id: null } }, 'missing_scope'],
    [{ decision: 'approve', scope: { kind: 'task', task_id: 7 } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'task', session_id: 's' } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'session' } }, 'missing_scope'],
    [{ decision: 'approve', scope: { kind: 'session', session_id: '' } }, 'missing_scope'],
    [{ decision: 'approve', scope: { kind: 'until' } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'until', until: 1.5 } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'until', until: '1900000000' } }, 'invalid_decision'],
    [{ decision: 'approve', scope: { kind: 'until', until: 2 ** 60 } }, 'invalid_decision'],
  ];
  for (const [body, code] of errors) {
    it(`${code}: ${JSON.stringify(body)}`, () => {
      expect(codeOf(body)).to.equal(code);
    });
  }

  it('scopeOf writes the until kind as time_limited', () => {
    expect(scopeOf({ kind: 'until', until: 1 })).to.equal('time_limited');
    expect(scopeOf({ kind: 'task', task_id: 't' })).to.equal('task');
    expect(MAX_UNTIL_SECS * 1000).to.equal(Date.parse('9999-12-31T23:59:59Z'));
  });
});

describe('approval helpers', () => {
  it('summaryOf: <METHOD> <host> <path>, no query or fragment, one line', () => {
    expect(summaryOf('post', 'slack.com', '/api/chat.postMessage')).to.equal('POST slack.com /api/chat.postMessage');
    expect(summaryOf('GET', 'h', '/a?token=secret#frag')).to.equal('GET h /a');
    expect(summaryOf('GET', 'h', '')).to.equal('GET h /');
    expect(summaryOf('GET', 'h', '/a\r\nInjected: 1')).to.equal('GET h /a  Injected: 1');
  });

  it('effectiveStatus: pending past expires_at reads expired; decided states stay', () => {
    expect(effectiveStatus({ status: 'pending', expires_at: 1000 }, 999)).to.equal('pending');
    expect(effectiveStatus({ status: 'pending', expires_at: 1000 }, 1000)).to.equal('expired');
    expect(effectiveStatus({ status: 'approved', expires_at: 1000 }, 5000)).to.equal('approved');
    expect(effectiveStatus({ status: 'denied', expires_at: 1000 }, 5000)).to.equal('denied');
  });
});
