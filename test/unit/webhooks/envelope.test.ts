import { expect } from 'chai';
import { buildEnvelope } from '../../../webhooks/envelope.js';
import { isId } from '../../../lib/ids.js';

describe('webhook envelope (webhooks/envelope)', () => {
  const at = Date.UTC(2026, 10, 22, 10, 0, 0, 7);

  it('is {id, type, created, environment_id, data}, in that order, with an evt_ id and RFC 3339 ms created', () => {
    const { envelope, body } = buildEnvelope({ type: 'approval.requested', createdAtMs: at, environmentId: 'env_0123456789abcdef01234567', data: { a: 1 } });
    expect(Object.keys(envelope)).to.deep.equal(['id', 'type', 'created', 'environment_id', 'data']);
    expect(isId('evt', envelope.id)).to.equal(true);
    expect(envelope.created).to.equal('2026-11-22T10:00:00.007Z');
    expect(body).to.equal(JSON.stringify(envelope));
    expect(JSON.parse(body)).to.deep.equal({ id: envelope.id, type: 'approval.requested', created: '2026-11-22T10:00:00.007Z', environment_id: 'env_0123456789abcdef01234567', data: { a: 1 } });
  });

  it('keeps a given id (a retry re-sends the same event) and allows a null environment', () => {
    const { envelope } = buildEnvelope({ id: 'evt_000000000000000000000001', type: 'connection.revoked', createdAtMs: at, environmentId: null, data: {} });
    expect(envelope.id).to.equal('evt_000000000000000000000001');
    expect(envelope.environment_id).to.equal(null);
  });

  it('gives each new event its own id', () => {
    const a = buildEnvelope({ type: 't', createdAtMs: at, environmentId: null, data: {} });
    const b = buildEnvelope({ type: 't', createdAtMs: at, environmentId: null, data: {} });
    expect(a.envelope.id).to.not.equal(b.envelope.id);
  });
});
