import { expect } from 'chai';
import { REDACTED, redactSession, sessionMethod, stripHttpOnly, urlAllowed } from '../../../browser/cdp-rules.js';
import { logTail } from '../../../browser/browser-sandbox.js';

/**
 * The CDP relay's pure rules (issue 23, items 2 and 4): what an agent may send to a session
 * of its lease, where a page may go, and what of the profile's session it may never hear.
 */
describe('CDP rules: the session-level allow-list', () => {
  const allowed = [
    'Page.navigate', 'Page.captureScreenshot', 'Page.addScriptToEvaluateOnNewDocument', 'Runtime.evaluate', 'Runtime.addBinding',
    'DOM.querySelector', 'DOM.setFileInputFiles', 'Input.dispatchMouseEvent', 'Network.enable', 'Network.getResponseBody', 'Emulation.setDeviceMetricsOverride',
    'Fetch.enable', 'Fetch.fulfillRequest', 'Accessibility.getFullAXTree', 'Target.setAutoAttach', 'Storage.getCookies', 'Security.enable', 'Log.enable',
  ];
  const refused = [
    'Target.attachToTarget', 'Target.getTargets', 'Target.createTarget', 'Target.closeTarget', 'Target.activateTarget', 'Target.getTargetInfo',
    'Target.createBrowserContext', 'Target.exposeDevToolsProtocol', 'Target.setDiscoverTargets', 'Target.attachToBrowserTarget',
    'Browser.setDownloadBehavior', 'Browser.close', 'Browser.getVersion', 'Page.setDownloadBehavior', 'Page.handleFileChooser',
    'IO.read', 'IO.resolveBlob', 'SystemInfo.getProcessInfo', 'Tracing.start', 'Memory.getDOMCounters', 'Network.loadNetworkResource',
    'Security.setIgnoreCertificateErrors', 'Storage.clearDataForOrigin', 'ServiceWorker.enable', 'Extensions.loadUnpacked',
    'HeadlessExperimental.beginFrame', 'Tethering.bind', 'SomeFutureDomain.doAnything', 'pagenavigate', '', 'Page',
  ];
  for (const m of allowed) it(`passes ${m}`, () => expect(sessionMethod(m)).to.deep.equal({ ok: true }));
  for (const m of refused) {
    it(`refuses ${m || '(empty)'}`, () => {
      const v = sessionMethod(m);
      expect(v.ok).to.equal(false);
    });
  }
});

describe('CDP rules: where a page may go', () => {
  const yes = ['https://example.com/', 'http://example.com', 'about:blank', '', 'data:text/html,hi', 'blob:https://example.com/1', 'HTTPS://EXAMPLE.COM'];
  const no = [
    'file:///etc/shadow', 'FILE:///etc/passwd', ' file:///x', 'chrome://version', 'chrome-untrusted://terminal', 'chrome-extension://abc/x.html', 'devtools://devtools/bundled/inspector.html',
    'view-source:https://example.com', 'about:version', 'javascript:alert(1)', 'filesystem:https://example.com/temporary/x', '/relative', 'example.com', 42, null, undefined,
  ];
  for (const u of yes) it(`allows ${JSON.stringify(u)}`, () => expect(urlAllowed(u)).to.equal(true));
  for (const u of no) it(`refuses ${JSON.stringify(u)}`, () => expect(urlAllowed(u)).to.equal(false));
});

describe('CDP rules: the session never reaches the agent', () => {
  it('replaces Cookie, Set-Cookie and Authorization values in header maps, header arrays and raw header text, at any depth', () => {
    const ev = {
      method: 'Network.responseReceivedExtraInfo',
      params: {
        headers: { 'Set-Cookie': 'sid=s3cret; HttpOnly', 'content-type': 'text/html' },
        headersText: 'HTTP/1.1 200 OK\r\nset-cookie: sid=s3cret\r\nContent-Type: text/html\r\n\r\n',
        blockedCookies: [{ blockedReasons: [], cookie: { name: 'sid', value: 's3cret' }, cookieLine: 'sid=s3cret' }],
        nested: { request: { headers: [{ name: 'Authorization', value: 'Bearer s3cret' }, { name: 'Accept', value: '*/*' }] } },
        response: { requestHeaders: { Cookie: 'sid=s3cret' }, requestHeadersText: 'GET / HTTP/1.1\r\nCookie: sid=s3cret\r\n' },
        associatedCookies: [{ cookie: { name: 'sid', value: 's3cret', httpOnly: true }, blockedReasons: [] }],
        issue: { cookieIssueDetails: { rawCookieLine: 'sid=s3cret' } },
      },
    };
    const out = redactSession(ev);
    expect(JSON.stringify(out)).to.not.include('s3cret');
    const p = (out as typeof ev).params;
    expect(p.headers['content-type']).to.equal('text/html');
    expect(p.headers['Set-Cookie']).to.equal(REDACTED);
    expect(p.headersText).to.include('Content-Type: text/html');
    expect(p.nested.request.headers[1]).to.deep.equal({ name: 'Accept', value: '*/*' });
  });

  it('cookie reads keep HttpOnly cookies without their value, other cookies whole', () => {
    const out = stripHttpOnly({ cookies: [{ name: 'sid', value: 's3cret', httpOnly: true }, { name: 'theme', value: 'dark', httpOnly: false }] }) as { cookies: Array<{ value: string }> };
    expect(out.cookies.map((c) => c.value)).to.deep.equal(['', 'dark']);
    expect(stripHttpOnly(undefined)).to.equal(undefined);
    expect(stripHttpOnly({ other: 1 })).to.deep.equal({ other: 1 });
  });
});

describe('the browser\'s log lines', () => {
  it('keep Chromium\'s last lines without its noise and without any URL (a page address may carry a site\'s token)', () => {
    const out = logTail([
      '[1:2:ERROR:dbus/bus.cc] Failed to connect to the bus',
      '[3:4:FATAL:render_frame_host_impl.cc] Check failed. https://app.example.com/cb?code=4/0AVG-secret-code&state=x',
      '[5:6:ERROR:navigation] blob:https://app.example.com/1234 data:text/html,<b>s3cret</b> file:///home/x',
      '',
    ].join('\n'));
    expect(out).to.not.match(/dbus|secret|s3cret|app\.example\.com|file:/);
    expect(out).to.include('Check failed. <url>');
    expect(out.split(' | ')).to.have.length(2);
  });
});
