/**
 * MIME header blocks for the approval card (issue 15, item 2; issue 23, item 5). PURE.
 *
 * The agent wrote every byte, and a recipient the card does not show is a recipient the
 * approver did not agree to, so the header block is read whole or not at all:
 *  - it runs from the first byte to the first empty line (LF or CRLF), or to the end of a
 *    message that has no body; nothing in it is skipped for its size (issue 23: a `Bcc`
 *    after 270 KB of filler headers fell past the 256 KiB the decoder used to read);
 *  - bytes that two readers could split differently give an error instead of a reading:
 *    a CR not followed by LF, CRLF and bare LF mixed, a NUL, bytes that are not UTF-8;
 *  - in a multipart upload the message part is found only between boundary lines both a
 *    strict and a lenient reader agree on; a line that begins with the boundary but is not
 *    one, two message parts, or a message part under a transfer encoding, is an error.
 * The size bound is the provider's: Gmail takes messages up to 35 MiB (MAX_MESSAGE_BYTES).
 */

/**
 * The largest message Gmail accepts: `maxSize` 36700160 (35 MiB) of `messages.send` and
 * `drafts.send` in Gmail's discovery document (`mediaUpload`, accept `message/*`). A larger
 * message is one Gmail refuses, so the card does not try to read it.
 */
export const MAX_MESSAGE_BYTES = 36_700_160;

/** RFC 2047 encoded words (`=?utf-8?B?...?=`, `=?iso-8859-1?Q?...?=`); others left as they are. */
export function decodeEncodedWords(s: string): string {
  return s
    .replace(/(=\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)\s+(?==\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)/g, '$1')
    .replace(/=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g, (whole, charset: string, enc: string, text: string) => {
      let bytes: Buffer;
      if (enc.toUpperCase() === 'B') bytes = Buffer.from(text, 'base64');
      else {
        const t = text.replace(/_/g, ' ');
        const arr: number[] = [];
        for (let i = 0; i < t.length; i++) {
          const hex = t.slice(i + 1, i + 3);
          if (t[i] === '=' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
            arr.push(parseInt(hex, 16));
            i += 2;
          } else arr.push(t.charCodeAt(i) & 0xff);
        }
        bytes = Buffer.from(arr);
      }
      try {
        return new TextDecoder(charset.split('*')[0]!.toLowerCase()).decode(bytes);
      } catch {
        return whole; // a charset we do not know: shown as sent
      }
    });
}

/** Where the header block of `message` ends: the start of its first empty line, or its length. */
function headerEnd(message: string): number {
  let start = 0;
  for (;;) {
    const nl = message.indexOf('\n', start);
    if (nl === -1) return message.length;
    if (nl === start || (nl === start + 1 && message[start] === '\r')) return start;
    start = nl + 1;
  }
}

/** The header block of an RFC 5322 message, unfolded: name (lowercased) → values in order. */
export function mimeHeaders(message: string): Map<string, string[]> {
  const block = message.slice(0, headerEnd(message));
  const out = new Map<string, string[]>();
  let current: { name: string; value: string } | null = null;
  const flush = () => {
    if (current) {
      // Pushed, not copied: a block of 10 MB of `To:` lines is a million values (issue 23).
      const list = out.get(current.name);
      if (list) list.push(current.value.trim());
      else out.set(current.name, [current.value.trim()]);
    }
    current = null;
  };
  for (const line of block.split(/\r?\n/)) {
    if ((line.startsWith(' ') || line.startsWith('\t')) && current) {
      current.value += ` ${line.trim()}`;
      continue;
    }
    flush();
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    current = { name: line.slice(0, colon).trim().toLowerCase(), value: line.slice(colon + 1) };
  }
  flush();
  return out;
}

export type HeaderBlock = { readonly text: string; readonly error?: undefined } | { readonly text?: undefined; readonly error: string };

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The whole header block of a message given as bytes (everything before its first empty
 * line), as text; or why it cannot be read one way.
 */
export function readHeaderBlock(message: Uint8Array): HeaderBlock {
  if (message.byteLength > MAX_MESSAGE_BYTES) return { error: `the message is larger than the ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB Gmail accepts` };
  let end = message.byteLength;
  let crlf = 0;
  let lf = 0;
  let start = 0;
  for (let i = 0; i < message.byteLength; i++) {
    const b = message[i]!;
    if (b === 0) return { error: 'the message headers contain a NUL byte' };
    if (b === 0x0d && message[i + 1] !== 0x0a) return { error: 'the message headers contain a CR not followed by LF' };
    if (b !== 0x0a) continue;
    if (i > 0 && message[i - 1] === 0x0d) crlf++;
    else lf++;
    if (i === start || (i === start + 1 && message[start] === 0x0d)) {
      end = start;
      break;
    }
    start = i + 1;
  }
  // One reader may end lines at LF, another only at CRLF: with both in the headers they
  // could disagree on where the headers end (and so on who receives the message).
  if (crlf > 0 && lf > 0) return { error: 'the message headers mix CRLF and LF line ends' };
  try {
    return { text: STRICT_UTF8.decode(message.subarray(0, end)) };
  } catch {
    return { error: 'the message headers are not UTF-8' };
  }
}

/**
 * The message/rfc822 part of a multipart upload: its bytes, undefined when there is none, or
 * why the upload cannot be split one way.
 */
export function rfc822Part(body: Uint8Array, contentType: string): { readonly bytes: Uint8Array } | { readonly error: string } | undefined {
  const params = contentType.match(/;\s*boundary\*?\s*=/gi) ?? [];
  if (params.length > 1) return { error: 'the upload names more than one boundary' };
  if (params.length === 0 || /;\s*boundary\*/i.test(contentType)) return params.length === 0 ? undefined : { error: 'the upload boundary is RFC 2231-encoded' };
  const boundary = /;\s*boundary\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(contentType);
  const b = boundary?.[1] ?? boundary?.[2] ?? '';
  if (b === '') return { error: 'the upload boundary is empty' };
  // Bytes as latin1: one character per byte, so offsets are byte offsets.
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('latin1');
  const dash = `--${b}`;
  // Every place a line starts with the boundary: each must be a delimiter line (`--b` or
  // `--b--`, then spaces, then CRLF or the end), preceded by CRLF (or the body's start).
  const cuts: Array<{ at: number; contentFrom: number; close: boolean }> = [];
  for (let i = text.indexOf(dash); i !== -1; i = text.indexOf(dash, i + 1)) {
    const lineStart = i === 0 || text[i - 1] === '\n';
    if (!lineStart) continue;
    if (i > 0 && text[i - 2] !== '\r') return { error: 'a boundary line of the upload ends its previous line with LF, not CRLF' };
    const delimiterEnd = /(--)?[ \t]*(\r\n|$)/y;
    delimiterEnd.lastIndex = i + dash.length;
    const rest = delimiterEnd.exec(text);
    if (!rest) return { error: 'a line of the upload begins with the boundary but is not a boundary line' };
    cuts.push({ at: i === 0 ? 0 : i - 2, contentFrom: i + dash.length + rest[0].length, close: rest[1] === '--' });
    if (rest[1] === '--') break;
  }
  const messages: Uint8Array[] = [];
  for (let k = 0; k < cuts.length && !cuts[k]!.close; k++) {
    const cut = cuts[k]!;
    const part = text.slice(cut.contentFrom, cuts[k + 1]?.at ?? text.length);
    const headEnd = headerEnd(part);
    const headers = mimeHeaders(part.slice(0, headEnd));
    if (!(headers.get('content-type') ?? []).some((t) => t.toLowerCase().startsWith('message/rfc822'))) continue;
    const cte = (headers.get('content-transfer-encoding') ?? []).map((v) => v.toLowerCase());
    if (cte.some((v) => !['7bit', '8bit', 'binary'].includes(v))) return { error: `the message part is sent ${cte.join(', ')}-encoded` };
    const bodyFrom = headEnd + (part.startsWith('\r\n', headEnd) ? 2 : part.startsWith('\n', headEnd) ? 1 : 0);
    messages.push(Buffer.from(part.slice(bodyFrom), 'latin1'));
  }
  if (messages.length > 1) return { error: 'the upload carries more than one message/rfc822 part' };
  return messages.length === 1 ? { bytes: messages[0]! } : undefined;
}
