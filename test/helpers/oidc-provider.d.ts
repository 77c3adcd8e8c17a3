// oidc-provider ships no types; the tests use its constructor, callback() and options only.
declare module 'oidc-provider';
