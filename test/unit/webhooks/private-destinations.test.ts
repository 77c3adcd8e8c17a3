/** lib/net.ts and the webhook URL rules that use it. */
import { expect } from 'chai';
import { isPrivateAddress, isPrivateHostLiteral } from '../../../lib/net.js';
import { webhookUrlProblem, newWebhookSecret } from '../../../webhooks/endpoints.service.js';

describe('private destinations (lib/net)', () => {
  const privateIps = [
    '127.0.0.1', '127.255.255.254', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255',
    '192.168.0.1', '192.168.255.255', '169.254.169.254', '0.0.0.0', '0.1.2.3', '100.64.0.1',
    '::1', '::', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'febf::1', 'fe80::1%eth0',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.1.2.3', '::ffff:169.254.169.254', '64:ff9b::10.0.0.1', '0:0:0:0:0:0:0:1',
    // A fourth review: 6to4 of a private IPv4, Teredo, local-use NAT64, multicast.
    '2002:7f00:1::1', '2002:a9fe:a9fe::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '64:ff9b:1::a00:1', 'ff02::1', 'ff05::1:3',
  ];
  const publicIps = [
    '8.8.8.8', '1.1.1.1', '172.15.255.255', '172.32.0.0', '192.167.255.255', '192.169.0.0', '169.253.0.1',
    '11.0.0.1', '126.255.255.255', '128.0.0.1', '100.63.255.255', '100.128.0.0',
    '2001:4860:4860::8888', '2606:4700::1111', 'fec0::1', 'fbff::1', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8',
    '2002:808:808::1', '2001:1::1', '64:ff9b:2::1',
  ];
  for (const ip of privateIps) it(`${ip} is private`, () => expect(isPrivateAddress(ip)).to.equal(true));
  for (const ip of publicIps) it(`${ip} is public`, () => expect(isPrivateAddress(ip)).to.equal(false));
  it('a name is not an address', () => expect(isPrivateAddress('localhost')).to.equal(false));

  const privateHosts = ['localhost', 'LOCALHOST', 'localhost.', 'api.localhost', '[::1]', '::1', '127.1', '0x7f.0.0.1', '2130706433', '10.0.0.1', '[fe80::1]', '[::ffff:127.0.0.1]', '0.0.0.0'];
  const publicHosts = ['example.com', 'localhost.example.com', '8.8.8.8', '[2001:db8::1]', 'mylocalhost'];
  for (const h of privateHosts) it(`host ${h} is private`, () => expect(isPrivateHostLiteral(h)).to.equal(true));
  for (const h of publicHosts) it(`host ${h} is not private by its text`, () => expect(isPrivateHostLiteral(h)).to.equal(false));
});

describe('webhook URL rules (webhooks/endpoints.service)', () => {
  const ok = ['https://example.com/hook', 'http://example.com:8080/a?b=c', 'https://8.8.8.8/x', `https://example.com/${'a'.repeat(2048 - 'https://example.com/'.length)}`];
  const bad = [
    'example.com/hook', '/hook', 'ftp://example.com/', 'javascript:alert(1)', 'file:///etc/passwd', '',
    `https://example.com/${'a'.repeat(2049 - 'https://example.com/'.length)}`,
    'https://user:pw@example.com/', 'http://localhost:3000/', 'http://127.0.0.1/', 'http://[::1]/', 'http://10.0.0.5/',
    'http://172.20.0.1/', 'http://192.168.1.1/', 'http://169.254.169.254/latest/meta-data', 'http://[fd00::1]/', 'http://[fe80::1]/', 'http://0.0.0.0/',
    'http://127.1/', 'http://2130706433/',
  ];
  for (const u of ok) it(`accepts ${u.slice(0, 50)}`, () => expect(webhookUrlProblem(u, false)).to.equal(null));
  for (const u of bad) it(`refuses ${u.slice(0, 50) || '""'}`, () => expect(webhookUrlProblem(u, false)).to.be.a('string'));
  it('private hosts pass when private destinations are allowed', () => {
    expect(webhookUrlProblem('http://127.0.0.1:9999/hook', true)).to.equal(null);
    expect(webhookUrlProblem('http://localhost/hook', true)).to.equal(null);
    expect(webhookUrlProblem('ftp://127.0.0.1/', true)).to.be.a('string');
  });
  it('secrets are whsec_ and 43 base64url characters (32 bytes)', () => {
    const s = newWebhookSecret();
    expect(s).to.match(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(s.slice(6), 'base64url')).to.have.length(32);
  });
});
