/**
 * RFC 5322 address lists (`To`, `Cc`, `Bcc`, `From`, `Reply-To`) read for the approval card
 * (issue 23, item 5: "the approval card can hide a Bcc").
 *
 * PURE. The agent wrote the header, so the reading errs on the side of showing: every
 * address the provider might send to becomes an entry of its own, its address apart from
 * its display name, so a long or lying display name cannot push an address out of sight.
 *  - quoted display names may hold commas (`"Smith, Ann" <ann@x>`), comments may hold
 *    anything (`bob@x (Bob, HR)`): neither splits the list;
 *  - groups (`Team: a@x, b@x;`, `undisclosed-recipients:;`) list their members, and an empty
 *    group is an entry too (the card says it names no address);
 *  - encoded words (RFC 2047) are decoded in display names only: an encoded word that decodes
 *    to `<evil@x>` or a comma stays a name, never an address;
 *  - what is not a well-formed address is still an entry, shown as written with a note
 *    (`<a@x> b@y` gives two entries; `a@x; b@y` is read as two addresses, as Outlook writes);
 *  - what cannot be read one way (an unterminated quoted string, comment, `<` or `[`) is an
 *    error: the card then says it could not show the recipients, never a guess.
 * Values are returned raw (not cleaned, not cut): the caller (describe.ts) cleans and bounds.
 */
import { decodeEncodedWords } from './mime-headers.js';

export interface ParsedAddress {
  /** The address as written, comments and folding whitespace removed; '' for an empty group or `<>`. */
  readonly address: string;
  /** The display name (the phrase before `<…>`, then any comments), encoded words decoded; '' when none. */
  readonly name: string;
  /** The group it is listed under (`Team: a@x;`). */
  readonly group?: string;
  /** Why the entry is not a plain, well-formed address (shown beside it). */
  readonly note?: string;
}

export type AddressListResult = { readonly addresses: ParsedAddress[]; readonly error?: undefined } | { readonly addresses?: undefined; readonly error: string };

type Tok =
  | { readonly t: 'atom'; readonly v: string; readonly ws: boolean }
  | { readonly t: 'quoted'; readonly raw: string; readonly v: string; readonly ws: boolean }
  | { readonly t: 'literal'; readonly raw: string; readonly ws: boolean }
  | { readonly t: 'comment'; readonly v: string; readonly ws: boolean }
  | { readonly t: 'angle'; readonly inner: string; readonly ws: boolean }
  | { readonly t: 'special'; readonly v: string; readonly ws: boolean };

const WSP = new Set([' ', '\t', '\r', '\n']);
/** Characters that end an atom (RFC 5322 specials but `.`, plus whitespace). */
const ATOM_END = new Set([...WSP, '"', '(', ')', ',', ':', ';', '<', '>', '@', '[', ']', '\\']);

/** End (exclusive) of a delimited run starting at `i` (the opening char), honouring `\` escapes; -1 when unterminated. */
function skipDelimited(s: string, i: number, close: string): number {
  for (let j = i + 1; j < s.length; j++) {
    if (s[j] === '\\') j++;
    else if (s[j] === close) return j + 1;
  }
  return -1;
}

/** End (exclusive) of a comment starting at `i` (comments nest); -1 when unterminated. */
function skipComment(s: string, i: number): number {
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (c === '\\') j++;
    else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return j + 1;
  }
  return -1;
}

function unescape(s: string): string {
  return s.replace(/\\([\s\S])/g, '$1');
}

function tokenize(s: string, inAngle: boolean): Tok[] | string {
  const out: Tok[] = [];
  let ws = false;
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (WSP.has(c)) {
      ws = true;
      i++;
      continue;
    }
    if (c === '"') {
      const end = skipDelimited(s, i, '"');
      if (end === -1) return 'an unterminated quoted string';
      const raw = s.slice(i, end);
      out.push({ t: 'quoted', raw, v: unescape(raw.slice(1, -1)), ws });
      i = end;
    } else if (c === '(') {
      const end = skipComment(s, i);
      if (end === -1) return 'an unterminated comment';
      out.push({ t: 'comment', v: unescape(s.slice(i + 1, end - 1)).trim(), ws });
      i = end;
      ws = true; // a comment separates like whitespace (CFWS)
      continue;
    } else if (c === '[') {
      const end = skipDelimited(s, i, ']');
      if (end === -1) return 'an unterminated [';
      out.push({ t: 'literal', raw: s.slice(i, end), ws });
      i = end;
    } else if (c === '<' && !inAngle) {
      // The address runs to the first `>` outside quoted strings and comments.
      let j = i + 1;
      for (; j < s.length && s[j] !== '>'; j++) {
        if (s[j] === '"') j = skipDelimited(s, j, '"') - 1;
        else if (s[j] === '(') j = skipComment(s, j) - 1;
        else if (s[j] === '<') return 'a < inside <…>';
        if (j < 0) return 'an unterminated quoted string or comment inside <…>';
      }
      if (j >= s.length) return 'an unterminated <';
      out.push({ t: 'angle', inner: s.slice(i + 1, j), ws });
      i = j + 1;
    } else if (ATOM_END.has(c) || c === '<') {
      out.push({ t: 'special', v: c, ws });
      i++;
    } else {
      let j = i;
      while (j < s.length && !ATOM_END.has(s[j]!)) j++;
      out.push({ t: 'atom', v: s.slice(i, j), ws });
      i = j;
    }
    ws = false;
  }
  return out;
}

/** Display text of a phrase (display name or group name): words joined by one space, encoded words decoded. */
function phraseOf(toks: readonly Tok[]): string {
  let out = '';
  for (const k of toks) {
    if (k.t === 'comment') continue;
    const text = k.t === 'quoted' ? k.v : k.t === 'literal' ? k.raw : k.t === 'angle' ? `<${k.inner}>` : k.v;
    out += (k.ws && out !== '' ? ' ' : '') + text;
  }
  return decodeEncodedWords(out);
}

function commentsOf(toks: readonly Tok[]): string[] {
  return toks.flatMap((k) => (k.t === 'comment' && k.v !== '' ? [decodeEncodedWords(k.v)] : []));
}

/**
 * An address from its tokens, as written: comments dropped, whitespace dropped around `.`
 * and `@` (obsolete syntax allows `bob . smith @ x`), kept (and noted) anywhere else.
 */
function addressOf(toks: readonly Tok[]): { address: string; wellFormed: boolean } {
  let out = '';
  let wellFormed = true;
  let ats = 0;
  let prevWord = false;
  for (const k of toks) {
    if (k.t === 'comment') continue;
    if (k.t === 'special') {
      if (k.v === '@') ats++;
      else wellFormed = false;
      out += k.v;
      prevWord = false;
      continue;
    }
    const text = k.t === 'quoted' || k.t === 'literal' ? k.raw : k.t === 'angle' ? `<${k.inner}>` : k.v;
    if (k.t === 'angle') wellFormed = false;
    if (prevWord && k.ws && !out.endsWith('.') && !text.startsWith('.')) {
      out += ' ';
      wellFormed = false;
    }
    out += text;
    prevWord = true;
  }
  const at = out.lastIndexOf('@');
  if (ats !== 1 || at <= 0 || at === out.length - 1) wellFormed = false;
  return { address: out, wellFormed };
}

const NOT_WELL_FORMED = 'not a well-formed address: shown as written';

/** The address inside `<…>`; a source route (`<@relay:bob@x>`) is kept, and noted. */
function angleAddress(inner: string): { address: string; note?: string } | string {
  const toks = tokenize(inner, true);
  if (typeof toks === 'string') return toks;
  if (toks.every((k) => k.t === 'comment')) return { address: '', note: 'an empty address (<>)' };
  const { address, wellFormed } = addressOf(toks);
  return wellFormed ? { address } : { address, note: NOT_WELL_FORMED };
}

/** The entries of one list element (the tokens between two commas). */
function element(toks: readonly Tok[], group: string | undefined, out: ParsedAddress[]): string | undefined {
  if (toks.every((k) => k.t === 'comment')) return undefined; // an empty element (`a@x, , b@x`)
  const angles = toks.flatMap((k, i) => (k.t === 'angle' ? [i] : []));
  const push = (address: string, name: string, note?: string) => {
    out.push({ address, name, ...(group !== undefined ? { group } : {}), ...(note !== undefined ? { note } : {}) });
  };
  if (angles.length === 0) {
    const { address, wellFormed } = addressOf(toks);
    push(address, commentsOf(toks).join(' '), wellFormed ? undefined : NOT_WELL_FORMED);
    return undefined;
  }
  // `Name <a@x>`; anything odd (`<a@x> <b@y>`, `<a@x> b@y`) gives every candidate its own entry.
  let from = 0;
  for (const at of angles) {
    const a = angleAddress((toks[at] as { inner: string }).inner);
    if (typeof a === 'string') return a;
    const before = toks.slice(from, at);
    const name = [phraseOf(before), ...commentsOf(before)].filter((x) => x !== '').join(' ');
    push(a.address, name, angles.length > 1 ? 'several <…> in one entry' : a.note);
    from = at + 1;
  }
  const after = toks.slice(from);
  if (after.some((k) => k.t !== 'comment')) {
    const { address } = addressOf(after);
    push(address, '', 'text after <…>: shown as written');
  } else {
    const comments = commentsOf(after);
    if (comments.length > 0) {
      const last = out[out.length - 1]!;
      out[out.length - 1] = { ...last, name: [last.name, ...comments].filter((x) => x !== '').join(' ') };
    }
  }
  return undefined;
}

/** Parses one (unfolded, not yet decoded) address header value. */
export function parseAddressList(value: string): AddressListResult {
  const toks = tokenize(value, false);
  if (typeof toks === 'string') return { error: toks };
  const out: ParsedAddress[] = [];
  let group: string | undefined;
  let groupStart = 0;
  let cur: Tok[] = [];
  // Whether `cur` has an address part yet (then a `:` is no group): kept as it grows, not
  // searched at every `:` (`a@b::::…` would be quadratic).
  let curAddressed = false;
  const finish = (): string | undefined => {
    const err = element(cur, group, out);
    cur = [];
    curAddressed = false;
    return err;
  };
  const endGroup = () => {
    if (group !== undefined && out.length === groupStart) out.push({ address: '', name: '', group, note: 'an empty group: no address' });
    group = undefined;
  };
  for (const k of toks) {
    if (k.t === 'special' && k.v === ',') {
      const err = finish();
      if (err) return { error: err };
    } else if (k.t === 'special' && k.v === ':' && group === undefined && !curAddressed) {
      group = phraseOf(cur);
      groupStart = out.length;
      cur = [];
    } else if (k.t === 'special' && k.v === ';') {
      // Ends a group; outside one, a separator (as Outlook writes lists).
      const err = finish();
      if (err) return { error: err };
      endGroup();
    } else {
      cur.push(k);
      if (k.t === 'angle' || (k.t === 'special' && k.v === '@')) curAddressed = true;
    }
  }
  const err = finish();
  if (err) return { error: err };
  endGroup();
  return { addresses: out };
}
