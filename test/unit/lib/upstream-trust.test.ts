import { expect } from 'chai';
import { connect } from 'node:tls';
import { startFakeUpstream, type FakeUpstream } from '../../helpers/upstream.js';
import { upstreamSecureContext } from '../../../lib/upstream-trust.js';

/** The outbound TLS trust: the roots plus the operator's extra CA, one context shared by the service's callers. */
describe('upstream trust (lib/upstream-trust.ts)', () => {
  let a: FakeUpstream;
  let b: FakeUpstream;
  before(async () => {
    [a, b] = await Promise.all([startFakeUpstream(), startFakeUpstream()]);
  });
  after(async () => {
    await Promise.all([a.close(), b.close()]);
  });

  /** The TLS handshake's outcome with `up` (its certificate names localhost): 'ok' or the error's code. */
  function handshake(up: FakeUpstream, extraCa: string | null): Promise<string> {
    return new Promise((resolve) => {
      const s = connect({ host: '127.0.0.1', port: up.port, servername: 'localhost', secureContext: upstreamSecureContext(extraCa) });
      s.once('secureConnect', () => {
        s.destroy();
        resolve('ok');
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
  }

  it('the same trust asked again is the same context; another trust is a new one', () => {
    const first = upstreamSecureContext(a.ca.certPem);
    expect(upstreamSecureContext(a.ca.certPem)).to.equal(first);
    const other = upstreamSecureContext(b.ca.certPem);
    expect(other).to.not.equal(first);
    expect(upstreamSecureContext(null)).to.not.equal(other);
    expect(upstreamSecureContext(undefined)).to.equal(upstreamSecureContext(null));
  });

  it('trusts the extra CA it was asked for, and only that one, whatever was asked before', async () => {
    expect(await handshake(a, a.ca.certPem)).to.equal('ok');
    expect(await handshake(b, a.ca.certPem)).to.match(/UNABLE_TO_VERIFY|SELF_SIGNED|UNABLE_TO_GET_ISSUER/);
    expect(await handshake(b, b.ca.certPem)).to.equal('ok');
    expect(await handshake(a, b.ca.certPem)).to.match(/UNABLE_TO_VERIFY|SELF_SIGNED|UNABLE_TO_GET_ISSUER/);
    // No extra CA: Node's roots alone, which sign neither.
    expect(await handshake(a, null)).to.match(/UNABLE_TO_VERIFY|SELF_SIGNED|UNABLE_TO_GET_ISSUER/);
    expect(await handshake(a, a.ca.certPem)).to.equal('ok');
  });
});
