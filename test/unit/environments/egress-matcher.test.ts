/**
 * The host matcher of the egress allowlist and of secrets' allowed_hosts (decisions.md,
 * "Effective egress allowlist"): `*` allows every host, `*.example.com` subdomains only,
 * exact hosts case-insensitive, one trailing dot ignored, IP literals exact.
 */
import { expect } from 'chai';
import { DENY_ALL, compileHostPatterns, normalizeHost, normalizePatterns } from '../../../environments/egress.matcher.js';

type Case = [patterns: string[], host: string, allowed: boolean, why: string];

const CASES: Case[] = [
  // *
  [['*'], 'example.com', true, '* allows a name'],
  [['*'], 'a.b.c.example.com', true, '* allows a deep name'],
  [['*'], '10.0.0.1', true, '* allows an IPv4 literal'],
  [['*'], '::1', true, '* allows an IPv6 literal'],
  [['*'], '[2001:db8::1]', true, '* allows a bracketed IPv6 literal'],
  [['*'], '', false, 'an empty host is never allowed'],
  [['*'], 'exa mple.com', false, 'a malformed host is never allowed'],
  [['*'], 'a..com', false, 'an empty label is malformed'],
  // exact
  [['api.example.com'], 'api.example.com', true, 'exact'],
  [['api.example.com'], 'API.Example.COM', true, 'exact, host case ignored'],
  [['API.EXAMPLE.COM'], 'api.example.com', true, 'exact, pattern case ignored'],
  [['api.example.com'], 'api.example.com.', true, 'one trailing dot ignored'],
  [['api.example.com'], 'example.com', false, 'the parent is not the host'],
  [['api.example.com'], 'x.api.example.com', false, 'an exact pattern allows no subdomain'],
  [['api.example.com'], 'api.example.com.evil.com', false, 'a suffix attack'],
  [['api.example.com'], 'evilapi.example.com', false, 'a prefix attack'],
  [['api.example.com'], 'api.example.co', false, 'a shorter TLD'],
  [['localhost'], 'localhost', true, 'a single-label name'],
  // *.domain
  [['*.example.com'], 'api.example.com', true, 'a subdomain'],
  [['*.example.com'], 'a.b.example.com', true, 'a deeper subdomain'],
  [['*.example.com'], 'A.B.EXAMPLE.COM.', true, 'case and trailing dot ignored'],
  [['*.example.com'], 'example.com', false, 'not the domain itself'],
  [['*.example.com'], 'example.com.', false, 'not the domain itself, trailing dot'],
  [['*.example.com'], 'badexample.com', false, 'not a name that merely ends the same'],
  [['*.example.com'], '.example.com', false, 'an empty first label'],
  [['*.example.com'], 'example.com.evil.com', false, 'not a suffix attack'],
  [['*.example.com'], 'api.example.org', false, 'another domain'],
  [['*.example.com', 'example.com'], 'example.com', true, 'the domain when listed too'],
  [['*.com'], 'example.com', true, 'a TLD wildcard'],
  // IP literals
  [['10.0.0.1'], '10.0.0.1', true, 'an IPv4 literal, exact'],
  [['10.0.0.1'], '10.0.0.2', false, 'another IPv4'],
  [['10.0.0.1'], '10.0.0.1.', true, 'IPv4 with a trailing dot'],
  [['*.0.0.1'], '10.0.0.1', false, 'wildcards never match an IP literal'],
  [['*.1'], '10.0.0.1', false, 'wildcards never match an IP literal (short)'],
  [['0.0.1'], '10.0.0.1', false, 'no suffix matching of IPs'],
  [['api.example.com'], '::1', false, 'an IPv6 literal is not a name'],
  // empty and mixed
  [[], 'example.com', false, 'an empty list denies'],
  [['a.com', '*.b.com', '10.1.1.1'], 'x.b.com', true, 'mixed list, wildcard'],
  [['a.com', '*.b.com', '10.1.1.1'], 'a.com', true, 'mixed list, exact'],
  [['a.com', '*.b.com', '10.1.1.1'], 'b.com', false, 'mixed list, the wildcard parent'],
  [['a.com', '*.b.com', '10.1.1.1'], '10.1.1.1', true, 'mixed list, IP'],
  [['a.com', '*.b.com', '10.1.1.1'], 'c.com', false, 'mixed list, other'],
];

describe('egress matcher', () => {
  for (const [patterns, host, allowed, why] of CASES) {
    it(`${JSON.stringify(patterns)} ${allowed ? 'allows' : 'denies'} ${JSON.stringify(host)}: ${why}`, () => {
      expect(compileHostPatterns(patterns).allows(host)).to.equal(allowed);
    });
  }

  it('patterns are normalized, unique and sorted', () => {
    expect(compileHostPatterns(['B.com', 'a.com', 'b.com', '*', 'A.com.']).patterns).to.deep.equal(['*', 'a.com', 'b.com']);
  });

  it('is frozen: a caller cannot widen it', () => {
    const m = compileHostPatterns(['a.com']);
    expect(Object.isFrozen(m)).to.equal(true);
    expect(Object.isFrozen(m.patterns)).to.equal(true);
  });

  it('DENY_ALL denies everything', () => {
    for (const h of ['a.com', '10.0.0.1', '::1', 'localhost']) expect(DENY_ALL.allows(h)).to.equal(false);
    expect(DENY_ALL.patterns).to.deep.equal([]);
  });

  it('a non-string host is denied, not thrown on', () => {
    expect(compileHostPatterns(['*']).allows(undefined as unknown as string)).to.equal(false);
  });

  it('normalizeHost and normalizePatterns', () => {
    expect(normalizeHost(' API.Example.com. ')).to.equal('api.example.com');
    expect(normalizeHost('[::1]')).to.equal('::1');
    expect(normalizePatterns(['A.com', 'a.com', '*.B.com'])).to.deep.equal(['a.com', '*.b.com']);
  });
});
