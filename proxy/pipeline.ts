import type { IncomingMessage, ServerResponse, IncomingHttpHeaders } from 'node:http';
import { PassThrough, Transform, type Duplex, type Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Dispatcher } from 'undici';
import { classify, credentialMintingRule, needsBody } from '../policy-engine/classify/index.js';
import { looseSegments } from '../policy-engine/classify/minting.js';
import { describeRequest, MAX_DETAIL_VALUE, type RequestDetails } from '../policy-engine/describe.js';
import type { RequestFacts } from '../policy-engine/facts.js';
import { factsNeedBody, factsOf } from '../policy-engine/request-facts.js';
import type { Logger } from '../lib/log.js';
import type { AuditEntryInput } from '../audit/entry.js';
import type { Upstream } from './upstream.js';
import { mcpSecretMisplaced, placeCredentials, swapCredentials, type Credential, type CredentialSet, type McpServerRoute } from './credentials.js';
import { classifyMcp, FAIL_CLOSED_CATEGORY, type McpClassification } from '../policy-engine/classify/mcp.js';
import { describeMcpRequest } from '../policy-engine/describe.js';
import { sendMcpRefusal, ToolsListTap } from './mcp-answer.js';
import { refusal, sendRefusal, type Refusal } from './refusal.js';
import { ERROR_CODES } from '../lib/errors.js';
import { authorityMismatch, hostHeader, originForm, type Target } from './authority.js';
import { StreamRedactor } from './redact.js';
import { BodyBudget } from './body-budget.js';
import { noopMetrics, type Metrics } from '../lib/metrics.js';

/**
 * The request pipeline of the gateway, in the order of ARCHITECTURE.md: authenticate (done
 * by the caller) → allowlist → detect credential → classify → evaluate → hold → swap →
 * forward → audit. Every request ends in exactly one audit entry with a fixed reason.
 */
export interface Identity {
  environmentId: string;
  developerId: string;
}

export type { Target } from './authority.js';

export type Verdict = 'allow' | 'deny' | 'ask';

export interface PolicyDecision {
  decision: Verdict;
  reason: string;
  matched_rules: number[];
  max_scope?: string;
  /** `limits` (issue 26, item 2): a grant with limits is spent before forwarding (GatewayPorts.consumeGrant). */
  grant: { id: string; limits?: object | null } | null;
  /**
   * Present when a `count_over` rule counts this request (issue 26, item 1): called right
   * before forwarding (`approved`: a person approved it here); null once the request is
   * counted, or the decision that now refuses or asks (another node reached the count).
   */
  settle?: (approved: boolean) => Promise<Omit<PolicyDecision, 'settle'> | null>;
}

/** A host off the allowlist under `unknown_hosts: "ask"` (GatewayPorts.unknownHost). */
export interface UnknownHost {
  connector: string;
  category: string;
  grant: { id: string } | null;
}

export interface ApprovalOutcome {
  status: 'approved' | 'denied' | 'expired';
  grant_id: string | null;
}

/** One audit entry per request, in the audit domain's own input shape. */
export type AuditEntry = AuditEntryInput;

/** What the pipeline needs from the domains; bin/ wires the real services in. */
export interface GatewayPorts {
  /** The effective egress allowlist for host:port (a pattern may name a port). */
  egressAllows(id: Identity, host: string, port: number): Promise<boolean>;
  /**
   * A host the allowlist refuses (issue 26, item 3; docs/secrets-egress.md, "Unknown hosts"):
   * null when the environment refuses it (`unknown_hosts: "deny"`, the default); else the
   * connector (`egress:<host>`) and category (`connect`) to ask under, and the grant in
   * effect that covers this request (null: a person is asked). Absent: refused.
   */
  unknownHost?(id: Identity, host: string, tags: { task_id?: string; session_id?: string }): Promise<UnknownHost | null>;
  credentials(id: Identity): Promise<CredentialSet>;
  decide(id: Identity, req: { connector: string; category: string; task_id?: string; session_id?: string; infrastructure: boolean; facts?: RequestFacts | null; tool?: string }): Promise<PolicyDecision>;
  requestApproval(
    id: Identity,
    req: {
      connector: string; category: string; method: string; host: string; path: string; task_id?: string; session_id?: string; max_scope: string;
      /** What the request would do, for the console's card (built from the agent's bytes, placeholders hidden). */
      details?: RequestDetails | null;
      /** What the policy read from it: a decision's limits must cover it (issue 26, item 2). */
      facts?: RequestFacts | null;
      /** The MCP tool(s) it calls (issue 28): named in the summary; a grant covers only them. */
      tool?: string;
    },
  ): Promise<{ id: string }>;
  waitForDecision(approvalId: string, signal: AbortSignal): Promise<ApprovalOutcome>;
  /**
   * Spends one use of a grant with limits for this request, atomically across nodes (issue
   * 26, item 2); false: the request is not covered after all (decide again: it asks). Drops
   * the environment's cached grants either way. Absent: nothing can be spent, so a grant
   * with limits covers nothing (fail closed).
   */
  consumeGrant?(id: Identity, grantId: string, facts: RequestFacts | null): Promise<boolean>;
  /**
   * Records the exchange's entry and resolves once it is committed; rejects when the audit
   * store cannot take it. No answer is finished before this resolves (issue 10, item 3):
   * a refusal becomes 503 `gateway_unavailable`, a forwarded answer's connection is cut.
   */
  audit(entry: AuditEntry): Promise<void>;
}

export interface PipelineOptions {
  ports: GatewayPorts;
  upstream: Upstream;
  log: Logger;
  /** host:port pairs (lower-case) of the management API: never reachable through the gateway. */
  managementTargets: ReadonlySet<string>;
  /** Textual bodies up to this size are scanned for placeholders. */
  scanLimitBytes?: number;
  /** A request held for approval is buffered up to this size; beyond, 413. */
  holdLimitBytes?: number;
  /**
   * Bytes of request bodies buffered at once, per environment and in all (proxy/body-budget.ts);
   * a body past either is read as one too large to buffer. Default 64 MiB and 512 MiB.
   */
  bodyBudget?: { perEnvironmentBytes: number; totalBytes: number };
  /** Counts requests, their overhead and holds (issue 25, item 2); no-op by default. */
  metrics?: Metrics;
}

const HOP_BY_HOP = new Set([
  // expect: Node's server answered 100 Continue already; undici refuses the header (every such request was a 502).
  'expect',
  'connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'x-service-task-id', 'x-service-session-id', 'host',
]);
/**
 * Method overrides in spellings the classifier does not read (it reads X-HTTP-Method-Override
 * on every request, policy-engine/classify/http.ts): `X-HTTP-Method`, `X-Method-Override`,
 * and underscore forms a CGI-style server maps onto the dashed name; and the headers some
 * frameworks route by instead of the request line (`X-Original-URL`, `X-Rewrite-URL`: IIS,
 * Symfony). Not forwarded, so no upstream runs a method or a path the gateway did not classify.
 */
function notForwarded(name: string): boolean {
  const n = name.replace(/_/g, '-');
  return n === 'x-http-method' || n === 'x-method-override' || (n === 'x-http-method-override' && n !== name) || n === 'x-original-url' || n === 'x-rewrite-url'
    || FORWARDING.has(n);
}

/**
 * What a proxy says of the request's way (`Forwarded`, `X-Forwarded-Host`, ...): the agent's
 * own, never forwarded. A framework behind a load balancer may route by X-Forwarded-Host (the
 * host the gateway checked is the one it connects to, hole 2) or trust X-Forwarded-For for an
 * address allowlist (a fourth review).
 */
const FORWARDING = new Set(['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-forwarded-prefix', 'x-forwarded-server', 'x-real-ip', 'x-host']);

/** Methods whose requests usually carry no body (an upstream may not read one). */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'TRACE']);
const RESPONSE_HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'trailer', 'upgrade']);

function textual(contentType: string | undefined): boolean {
  const t = (contentType ?? '').toLowerCase();
  return t === '' || t.includes('json') || t.startsWith('text/') || t.startsWith('application/x-www-form-urlencoded') || t.startsWith('multipart/') || t.includes('xml');
}

function headerOnce(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Pipes `src` into `into` and returns `into`. pipe() passes neither an error nor a cut-off
 * request on: without these, the rest of a body whose sender went away would never end.
 * Nothing is passed back: a failed upstream must not destroy the agent's request (its
 * connection still gets the gateway's answer).
 */
function passOn<T extends Duplex>(src: Readable, into: T): T {
  src.once('error', (err) => into.destroy(err));
  src.once('close', () => {
    if ((src as IncomingMessage).complete === false) into.destroy(new Error('the request body was cut off'));
  });
  src.pipe(into);
  return into;
}

/**
 * A body streamed upstream, its bytes counted on the way. Regression: a 'data' listener on
 * the body itself started it flowing before undici read it, and what flowed meanwhile was
 * lost; a textual body over the 1 MiB scan limit failed with 502 (undici: content-length
 * mismatch), test/integration/proxy/mechanics.test.ts.
 */
function countedBody(src: Readable, onEnd: (n: number) => void): Readable {
  let n = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      n += chunk.length;
      cb(null, chunk);
    },
    flush(cb) {
      onEnd(n);
      cb();
    },
  });
  return passOn(src, counter);
}

/** Who pays for the bytes a read buffers (the exchange, charging the body budget). */
interface BodyCharge {
  takeBody(n: number): boolean;
}

/**
 * Reads up to `limit` bytes; `rest` is a stream of the whole body when it was longer, or
 * when `charge` refused a chunk (`overBudget`: the gateway buffers no more for now).
 * Plain listeners, all removed when done: the Readable async iterator used before left its
 * end-of-stream listeners (and their closures) on the request for as long as the request
 * lived, about 1.2 KiB per request held for approval (docs/performance.md).
 */
function readUpTo(req: Readable, limit: number, charge: BodyCharge): Promise<{ body: Buffer; complete: boolean; rest?: Readable; overBudget?: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    function onData(chunk: Buffer): void {
      chunks.push(chunk);
      size += chunk.length;
      const overBudget = size <= limit && !charge.takeBody(chunk.length);
      if (size <= limit && !overBudget) return;
      done();
      req.pause();
      const prefix = Buffer.concat(chunks, size);
      const rest = new PassThrough();
      rest.write(prefix);
      resolve({ body: prefix, complete: false, rest: passOn(req, rest), overBudget });
    }
    function onEnd(): void {
      done();
      resolve({ body: Buffer.concat(chunks, size), complete: true });
    }
    function onError(err: Error): void {
      done();
      reject(err);
    }
    function onClose(): void {
      done();
      reject(Object.assign(new Error('the request body was cut off'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
    // A 'data' listener does not start a stream that was paused explicitly (http-mitm-proxy
    // pauses the plain-HTTP requests it hands over).
    req.resume();
  });
}

/** Task and session ids: at most 255 characters, no control characters. */
const MAX_TAG = 255;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

function badTagHeader(value: string | undefined, name: string): string | null {
  if (value === undefined) return null;
  if (value.length > MAX_TAG) return `${name} may be at most ${MAX_TAG} characters (it has ${value.length})`;
  if (CONTROL.test(value)) return `${name} may not contain control characters`;
  return null;
}

function pathOnly(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

function upstreamError(err: unknown): Refusal {
  const e = err as { code?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (code === 'EGRESS_PRIVATE_ADDRESS') return refusal('egress_denied', (err as Error).message);
  if (code === 'GATEWAY_UNREADABLE_ANSWER') return refusal('upstream_unreachable', (err as Error).message);
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return refusal('upstream_timeout', 'the upstream did not answer in time');
  }
  return refusal('upstream_unreachable', 'the upstream could not be reached');
}

const kForward = Symbol('gateway.forward');
type ForwardedResponse = ServerResponse & { [kForward]?: Forward | undefined };

// Listeners shared by every response (they find their Forward on the response), so
// forwarding allocates no closure per request.
function onResponseClose(this: ForwardedResponse): void {
  this[kForward]?.agentClosed();
}
function onResponseDrain(this: ForwardedResponse): void {
  this[kForward]?.drained();
}

/**
 * Sends the request upstream and streams the answer into the agent's response, then
 * finishes the exchange (its audit entry) exactly once, or refuses it when nothing reached
 * the agent yet. An undici dispatch handler rather than `request()` and a pipe: no Readable
 * body stream, promise and pipe bookkeeping per request (docs/performance.md).
 * Backpressure: the upstream is paused while the agent's socket buffer is full. The agent
 * going away aborts the upstream request.
 */
class Forward implements Dispatcher.DispatchHandler {
  controller: Dispatcher.DispatchController | null = null;
  #status = 0;
  #out = 0;
  /** Response headers were written to the agent. */
  #started = false;
  /** The upstream's body ended. */
  #complete = false;
  #done = false;
  /** When the answer is redacted and came compressed: its codings, decoded from the first body byte on. */
  #codings: string[] | null = null;
  /** The decoders once started, outermost coding first. */
  #decoders: Transform[] | null = null;
  /**
   * The audit entry is committed before the answer can be complete (issue 10). A chunked
   * answer is complete only with its terminating chunk: every piece is written as it
   * comes (a server-sent event stream is not delayed) and only the end waits. An answer
   * with a Content-Length is complete with its last byte: the piece that reaches the
   * declared length is held here until the commit.
   */
  #held: Buffer | null = null;
  /** Bytes the declared Content-Length still expects; -1 when the answer is not length-delimited. */
  #remaining = -1;
  /**
   * Pieces of the answer waiting for the event loop's check phase, then written together
   * (flush): TLS hands the upstream's answer over in 16 KiB pieces, and the writes of one
   * turn go out as one encryption call and one syscall (Node corks a response's socket
   * until the next tick) instead of one each.
   */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #flushQueued = false;
  /** What feeds the answer (the upstream, or the last decoder): paused while the agent's buffer is full. */
  #source: Pausable | null = null;
  #waitingDrain = false;
  /**
   * The answer is chunked and the gateway writes the chunk framing itself: one chunk per
   * turn. Node frames every write as a chunk of its own (size line, CRLF, piece, CRLF:
   * four Writable writes per 16 KiB piece), which cost ~10 % of the gateway's CPU on a
   * 1 MiB answer (docs/performance.md).
   */
  #framed = false;
  /** The request went out on an upstream connection (the upstream may have acted on it). */
  #dispatched = false;

  constructor(
    private readonly x: Exchange,
    private readonly resolve: () => void,
  ) {}

  start(dispatcher: Dispatcher, opts: Dispatcher.DispatchOptions): void {
    const res = this.x.res as ForwardedResponse;
    res[kForward] = this;
    res.on('close', onResponseClose);
    dispatcher.dispatch(opts, this);
  }

  /** Ends the forwarding once; false when it had already ended. */
  #settle(): boolean {
    if (this.#done) return false;
    this.#done = true;
    const res = this.x.res as ForwardedResponse;
    res.off('close', onResponseClose);
    res.off('drain', onResponseDrain);
    res[kForward] = undefined;
    return true;
  }

  /** The answer was cut short (the agent left, the upstream failed mid-body): recorded, nothing to hold. */
  cutShort(): void {
    if (!this.#settle()) return;
    this.#pending = []; // never written: the answer is cut
    this.#pendingBytes = 0;
    this.x.entry.bytes_out = this.#out;
    if (this.x.redactor) this.x.entry.redacted = this.x.redactor.replaced > 0;
    void this.x.finish(this.#status).then(this.resolve);
  }

  /** The upstream's answer is all here (but the held piece and the end): commit the entry, then finish the answer. */
  #finishAnswer(tail: Buffer[]): void {
    if (!this.#settle()) return;
    const { x } = this;
    x.entry.bytes_out = this.#out;
    if (x.redactor) x.entry.redacted = x.redactor.replaced > 0;
    void x.finish(this.#status).then((committed) => {
      if (!committed || x.res.destroyed) {
        // Fail closed: the agent never gets a complete answer without its audit entry.
        x.res.destroy();
      } else {
        this.flush(); // if the check phase did not come first
        this.#write(tail, tail.reduce((n, piece) => n + piece.length, 0));
        if (this.#framed) x.res.end(LAST_CHUNK);
        else x.res.end();
      }
      this.resolve();
    });
  }

  agentClosed(): void {
    if (this.#done) return;
    if (this.#complete) return this.cutShort(); // the upstream was done, its answer still being decoded
    // Aborting makes undici call onResponseError, which settles. A request still queued
    // for a connection is aborted as soon as it starts (onRequestStart).
    this.controller?.abort(new Error('the agent closed the connection'));
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.controller = c;
    if (this.x.res.destroyed) c.abort(new Error('the agent closed the connection'));
    else this.#dispatched = true;
  }

  onResponseStart(c: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return; // 1xx: the final answer follows
    this.x.mcpTap?.start(statusCode, headers);
    const redactor = this.x.redactor;
    let codings: string[] = [];
    // No body follows (HEAD, 204, 304): the headers describe a body that is not here, so they stay.
    const bodyless = this.x.method === 'HEAD' || statusCode === 204 || statusCode === 304;
    if (redactor && !bodyless) {
      // We asked for identity; an upstream that compresses anyway is decoded, and one we
      // cannot decode is refused: an answer that was not checked never reaches the agent.
      codings = String(headers['content-encoding'] ?? '').toLowerCase().split(',').map((e) => e.trim()).filter((e) => e !== '' && e !== 'identity');
      if (!codings.every((e) => DECODERS[e] !== undefined)) {
        return c.abort(Object.assign(new Error(`the upstream answered with Content-Encoding ${String(headers['content-encoding'])}, which the gateway cannot check for the secret`), { code: 'GATEWAY_UNREADABLE_ANSWER' }));
      }
      // A part of a body: the value may be cut across parts no answer holds whole (Range
      // slices, multipart/byteranges). We asked for the whole; a part is not passed on.
      if (statusCode === 206 || String(headers['content-type'] ?? '').toLowerCase().startsWith('multipart/byteranges')) {
        return c.abort(Object.assign(new Error('the upstream answered with a part of the body, which the gateway cannot check for the secret whole'), { code: 'GATEWAY_UNREADABLE_ANSWER' }));
      }
    }
    const h: Record<string, string | string[]> = {};
    for (const k in headers) {
      const v = headers[k];
      if (v === undefined || RESPONSE_HOP_BY_HOP.has(k)) continue;
      if (k === 'set-cookie' && this.x.dropSetCookie) continue;
      if (redactor) {
        // The body changes length; a decoded body is no longer encoded.
        if (!bodyless && (k === 'content-length' || k === 'content-md5' || k === 'digest' || (codings.length > 0 && k === 'content-encoding'))) continue;
        h[k] = Array.isArray(v) ? v.map((one) => redactor.header(one)) : redactor.header(v);
      } else h[k] = v;
    }
    try {
      this.x.res.writeHead(statusCode, h);
    } catch (err) {
      return c.abort(err as Error); // a header Node will not send: 502 below
    }
    this.#started = true;
    this.#status = statusCode;
    if (this.x.res.chunkedEncoding) {
      // Node chose chunked framing (an HTTP/1.1 agent, a body of unknown length); it was
      // decided with the headers, keep-alive too: from here the gateway writes the frames.
      this.x.res.chunkedEncoding = false;
      this.#framed = true;
    }
    // Forwarded as declared (no redaction rewrote it): the piece that completes it waits for the commit.
    const declared = h['content-length'];
    if (!bodyless && typeof declared === 'string') this.#remaining = Number(declared);
    this.x.entry.upstream_status = statusCode;
    if (codings.length > 0) this.#codings = codings;
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#out += chunk.length;
    this.x.mcpTap?.push(chunk);
    if (this.#codings && !this.#decoders) this.#startDecoding(this.#codings);
    const decoders = this.#decoders;
    if (decoders) {
      if (!decoders[0]!.write(chunk) && !c.paused) {
        c.pause();
        decoders[0]!.once('drain', () => c.resume());
      }
      return;
    }
    if (this.x.redactor) return this.#writeRedacted(this.x.redactor.push(chunk), c);
    if (this.#remaining >= 0) {
      this.#remaining -= chunk.length;
      if (this.#remaining <= 0) {
        this.#held = chunk; // the last byte of the answer: written after the commit
        return;
      }
    }
    this.#queue(chunk, c);
  }

  #queue(piece: Buffer, source: Pausable): void {
    this.#pending.push(piece);
    this.#pendingBytes += piece.length;
    this.#source = source;
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    setImmediate(flushForward, this);
  }

  /** Writes what is pending (one chunk); pauses the source when the agent's buffer is full. */
  flush(): void {
    this.#flushQueued = false;
    const n = this.#pendingBytes;
    if (n === 0) return;
    const pending = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    const res = this.x.res;
    if (res.destroyed) return;
    const ok = this.#write(pending, n);
    const source = this.#source;
    if (!ok && !this.#waitingDrain && res.writableLength >= BACKPRESSURE_BYTES && source) {
      this.#waitingDrain = true;
      source.pause();
      res.once('drain', onResponseDrain);
    }
  }

  /** Writes `pieces` (n bytes in all), as one chunk when the gateway frames the answer. */
  #write(pieces: Buffer[], n: number): boolean {
    if (n === 0) return true;
    const res = this.x.res;
    let ok = true;
    if (this.#framed) res.write(`${n.toString(16)}\r\n`, 'latin1');
    for (const piece of pieces) ok = res.write(piece);
    if (this.#framed) ok = res.write(CRLF);
    return ok;
  }

  drained(): void {
    this.#waitingDrain = false;
    this.#source?.resume();
  }

  onResponseEnd(): void {
    this.#complete = true;
    this.x.mcpTap?.end();
    this.x.upstreamMs = performance.now() - this.x.upstreamAt;
    if (this.#decoders) {
      this.#decoders[0]!.end();
      return; // the last decoder's 'end' finishes the answer
    }
    this.#endBody();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    const { x } = this;
    if (this.#started) {
      x.res.destroy();
      return this.cutShort();
    }
    if (!this.#settle()) return;
    const answered = x.res.destroyed ? x.agentGone(this.#dispatched) : x.refuse(upstreamError(err), x.entry.decision);
    void answered.then(this.resolve);
  }

  #endBody(): void {
    // What this turn brought but has not written yet goes out with the end, after the
    // commit: for an answer that fits in one turn (most API answers) the headers, the body
    // and a chunked answer's last chunk then leave in one TLS record and one syscall, where
    // a redacted answer took two (body at this turn's check phase, last chunk after the
    // commit). Nothing completes sooner either way: the end waits for the commit.
    const tail = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    if (this.#held) tail.push(this.#held);
    this.#held = null;
    if (this.x.redactor) for (const piece of this.x.redactor.end()) tail.push(piece);
    this.#finishAnswer(tail);
  }

  /**
   * Queues redacted pieces (a redacted answer is chunked: only its end waits for the
   * commit); `source` (the upstream or the last decoder) is paused while the agent's buffer is full.
   */
  #writeRedacted(pieces: Buffer[], source: Pausable): void {
    for (const piece of pieces) this.#queue(piece, source);
  }

  #startDecoding(codings: string[]): void {
    // Content-Encoding lists codings in the order applied: undo the last one first.
    const decoders = codings.reverse().map((e) => DECODERS[e]!());
    for (let i = 0; i + 1 < decoders.length; i++) decoders[i]!.pipe(decoders[i + 1]!);
    const last = decoders[decoders.length - 1]!;
    const redactor = this.x.redactor!;
    last.on('data', (d: Buffer) => this.#writeRedacted(redactor.push(d), last));
    last.once('end', () => this.#endBody());
    for (const d of decoders) {
      d.once('error', () => {
        // Headers are out: all that is left is to cut the answer short.
        this.controller?.abort(new Error('the upstream\'s compressed answer could not be decoded'));
        this.x.res.destroy();
        this.cutShort();
      });
    }
    this.#decoders = decoders;
  }
}

function flushForward(f: Forward): void {
  f.flush();
}

interface Pausable {
  pause(): unknown;
  resume(): unknown;
}

/**
 * The upstream is paused only when this much waits for the agent's connection (the agent's
 * socket reports "full" past 16 KiB, i.e. after nearly every turn's write; pausing there
 * would stop the upstream once per turn).
 */
const BACKPRESSURE_BYTES = 256 * 1024;
const CRLF = Buffer.from('\r\n', 'latin1');
/** The end of a chunked answer (no trailers: the upstream's are not forwarded). */
const LAST_CHUNK = Buffer.from('0\r\n\r\n', 'latin1');

/** Content codings the gateway can decode to redact an answer. */
const DECODERS: Record<string, (() => Transform) | undefined> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** Everything the pipeline is built with, shared by every exchange. */
interface Settings {
  ports: GatewayPorts;
  upstream: Upstream;
  log: Logger;
  managementTargets: ReadonlySet<string>;
  scanLimit: number;
  holdLimit: number;
  bodies: BodyBudget;
  metrics: Metrics;
  life: Lifecycle;
}

/** What a request held or arriving while the node stops gets (issue 25, item 7): retry, likely on another node. */
export const STOPPING = refusal('gateway_unavailable', 'the gateway is stopping; nothing was forwarded: send it again');
STOPPING.retryAfter = 5;
/** The reason a held request's wait is aborted with when the node stops (the agent's leaving aborts with none). */
const STOPPING_ABORT = new Error('the gateway is stopping');

/**
 * The exchanges of one pipeline, for a graceful stop: how many are running, the held ones'
 * aborts, and who waits for the count to reach zero. Counted with bound methods, so a request
 * allocates nothing for it.
 */
class Lifecycle {
  draining = false;
  active = 0;
  readonly held = new Set<AbortController>();
  #idle: (() => void) | null = null;

  readonly done = (): void => {
    this.active--;
    if (this.active === 0 && this.#idle) this.#idle();
  };

  /** Stops new exchanges, answers the held ones 503 with Retry-After, waits for the rest at most graceMs. */
  async drain(graceMs: number): Promise<{ unfinished: number }> {
    this.draining = true;
    for (const a of this.held) a.abort(STOPPING_ABORT);
    if (this.active > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.#idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#idle = null;
    }
    return { unfinished: this.active };
  }
}

/** A decision a count_over rule counts, settled right before forwarding (issue 26, item 1). */
interface Settle {
  c: Credential;
  category: string;
  settle: NonNullable<PolicyDecision['settle']>;
  approved: boolean;
}

/** A grant with limits that allowed a request, to be spent before it is forwarded (issue 26, item 2). */
interface Spend {
  grantId: string;
  c: Credential;
  category: string;
}
/** Rounds of decide-and-spend before a request whose grant keeps refusing it is held anyway. */
const MAX_SPEND_ATTEMPTS = 4;

/** Why an exchange stops before forwarding: a refusal to send, or `done` (already finished). */
type Stop = { r: Refusal; decision: Verdict; reason: string } | 'done';

const stop = (r: Refusal, decision: Verdict = 'deny', reason: string = r.code): Stop => ({ r, decision, reason });
const storeDown = (what: string): Refusal => refusal('gateway_unavailable', `the gateway ${what}; nothing was forwarded`);
const AUDIT_DOWN = storeDown('could not record this request in its audit log');

/**
 * One request through the gateway. A class, not closures inside a handler: nothing is
 * allocated per request for the stages themselves, and a request held for approval keeps
 * only this object and its suspended calls (docs/performance.md, hold test).
 */
class Exchange {
  readonly started = performance.now();
  /**
   * For gateway_request_overhead_seconds (issue 25, item 2): when the request was handed to
   * the upstream, how long the upstream took (to its last byte, or until the answer was cut
   * short), and how long it was held for approval. Plain numbers: no allocation per request.
   */
  upstreamAt = 0;
  upstreamMs = 0;
  heldMs = 0;
  readonly method: string;
  readonly url: string;
  readonly entry: AuditEntry;
  taskId: string | undefined;
  sessionId: string | undefined;
  readonly contentType: string | undefined;
  readonly hasBody: boolean;
  body: Buffer | null = null;
  bodyComplete: boolean;
  /** This environment's placeholders and stand-ins (hidden from an approval card's details). */
  tokens: ReadonlyMap<string, Credential> = new Map();
  rest: Readable | undefined = undefined;
  /** Set when a real value was swapped in: the answer is redacted of it. */
  redactor: StreamRedactor | null = null;
  /** The answer's Set-Cookie is dropped (a credential was swapped into the request; none may mint). */
  dropSetCookie = false;
  /** Grants with limits the policy used for this request, spent before forwarding (authorize); null: none. */
  spend: Spend[] | null = null;
  /** What the policy read from the request (issue 26), set in evaluate; recorded with the audit entry. */
  facts: RequestFacts | null = null;
  /** Counts to settle before forwarding (count_over rules, issue 26 item 1); null: none. */
  settles: Settle[] | null = null;
  /** The registered MCP server this request goes to (issue 28); null: not an MCP request. */
  mcp: McpServerRoute | null = null;
  /** Its JSON-RPC classification (policy-engine/classify/mcp.ts), once the body is read. */
  mcpCls: McpClassification | null = null;
  /** The policy's subject for it: connector `mcp:<name>`, the kind of the server's secret if sent. */
  mcpSubject: Credential | null = null;
  /** Reads the answer of a tools/list for the server's annotations. */
  mcpTap: ToolsListTap | null = null;
  /** The server's secret sent to another path of its origin than its URL's: unreadable as MCP. */
  mcpOffPath = false;
  /** Bytes of this request's body charged to the body budget, given back when the exchange ends. */
  charged = 0;

  constructor(
    readonly s: Settings,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly target: Target,
    readonly id: Identity,
  ) {
    this.method = (req.method ?? 'GET').toUpperCase();
    this.url = originForm(req.url);
    this.entry = {
      environment_id: id.environmentId, developer_id: id.developerId, method: this.method, host: target.host, path: this.url,
      connector: null, category: null, credential: 'none', decision: 'allow', reason: 'no_credential', matched_rules: [],
      approval_id: null, grant_id: null, status: 0, upstream_status: null, bytes_in: 0, bytes_out: 0, duration_ms: 0,
    };
    const h = req.headers;
    this.taskId = headerOnce(h, 'x-service-task-id') || undefined;
    this.sessionId = headerOnce(h, 'x-service-session-id') || undefined;
    this.contentType = headerOnce(h, 'content-type');
    this.hasBody = h['content-length'] !== undefined ? h['content-length'] !== '0' : h['transfer-encoding'] !== undefined;
    this.bodyComplete = !this.hasBody;
  }

  /** BodyCharge: `n` more bytes of this request's body buffered, if its environment's share and the total allow. */
  takeBody(n: number): boolean {
    if (!this.s.bodies.take(this.id.environmentId, n)) return false;
    this.charged += n;
    return true;
  }

  /** Reads on from what a shorter read left (`rest` replays its prefix, charged again as read), or from the request. */
  readOn(limit: number): ReturnType<typeof readUpTo> {
    if (this.rest) this.releaseBody();
    return readUpTo(this.rest ?? this.req, limit, this);
  }

  /** Gives back what the body budget was charged (the buffered body is no longer counted). */
  releaseBody(): void {
    this.s.bodies.give(this.id.environmentId, this.charged);
    this.charged = 0;
  }

  /** A held request whose body cannot be buffered: too large, or its environment's share (or the gateway's) is spent. */
  tooLargeToHold(overBudget: boolean | undefined): Stop {
    if (!overBudget) return stop(refusal('payload_too_large', `a request held for approval may carry at most ${this.s.holdLimit} bytes`), 'deny', 'payload_too_large');
    const r = refusal('payload_too_large', `the gateway already buffers as many request bodies for this environment as it may (${this.s.bodies.perEnvironment} bytes, requests held for approval included, or its total across environments): send it again once some have finished`);
    r.retryAfter = 5;
    return stop(r, 'deny', 'request_buffer_full');
  }

  /** The audit entry, once per exchange: true once it is committed, false when the audit store could not take it. */
  async finish(status: number): Promise<boolean> {
    this.entry.status = status;
    // Bounded and scrubbed by the audit writer (audit/entry.ts sanitizeFacts).
    this.entry.facts = this.facts;
    this.entry.duration_ms = Math.round(performance.now() - this.started);
    // Dispatched but not answered to the end (cut short, failed): the upstream's share ends here.
    if (this.upstreamAt > 0 && this.upstreamMs === 0) this.upstreamMs = performance.now() - this.upstreamAt;
    try {
      await this.s.ports.audit(this.entry);
      return true;
    } catch (err) {
      this.s.log.error({ err_code: (err as { code?: string }).code ?? 'unknown' }, 'audit entry not committed: failing closed');
      return false;
    } finally {
      // Once per exchange, after its audit commit (part of the gateway's time).
      const { entry } = this;
      this.s.metrics.requestDone(entry.decision, entry.category, entry.credential, (performance.now() - this.started - this.upstreamMs - this.heldMs) / 1000);
    }
  }

  /** A refusal, sent once its audit entry is committed; 503 when the audit store cannot take it. */
  async refuse(r: Refusal, decision: Verdict = 'deny', reason: string = r.code): Promise<void> {
    this.entry.decision = decision;
    this.entry.reason = reason;
    // An MCP request's refusal is a JSON-RPC error its client can show (issue 28): HTTP 200.
    const rpc = this.mcpCls !== null && this.mcpCls.ids.length > 0 ? this.mcpCls : null;
    const committed = await this.finish(rpc ? 200 : ERROR_CODES[r.code].status);
    if (this.res.destroyed) return;
    if (rpc) return sendMcpRefusal(this.req, this.res, committed ? r : AUDIT_DOWN, rpc.ids, rpc.batch);
    sendRefusal(this.req, this.res, committed ? r : AUDIT_DOWN);
  }

  /**
   * The agent went away before an answer reached it: nothing to send. When the request had
   * already gone out upstream, the entry says so (`client_disconnected_after_forward`): the
   * upstream may have acted on it (a held payment approved as the agent left).
   */
  async agentGone(forwarded = false): Promise<void> {
    this.entry.reason = forwarded ? 'client_disconnected_after_forward' : 'client_disconnected';
    await this.finish(499);
  }

  async run(): Promise<void> {
    const { s, target, id, req, url, method, entry } = this;
    try {
      // A request target never carries a fragment (RFC 9112); the checks read the path up to
      // `#` and an upstream may read past it (`/v1/products#/../../v1/charges`).
      if ((req.url ?? '').includes('#')) return this.refuse(refusal('invalid_request', 'a request target may not carry a fragment (#)'));
      // What was checked is what the upstream gets: a Host naming another host would be
      // routed there by the upstream's virtual hosting (issue 9, hole 2).
      const mismatch = authorityMismatch(req, target);
      if (mismatch) return this.refuse(refusal('host_mismatch', mismatch));
      // The task and session ids go into approvals and grants (255 characters there): one
      // the store cannot hold is the agent's error, not a store outage (it was a 503).
      const badTag = badTagHeader(this.taskId, 'X-Service-Task-Id') ?? badTagHeader(this.sessionId, 'X-Service-Session-Id');
      if (badTag) {
        this.taskId = undefined;
        this.sessionId = undefined;
        return this.refuse(refusal('invalid_task_header', badTag));
      }
      if (s.managementTargets.has(`${target.host}:${target.port}`)) {
        return this.refuse(refusal('egress_denied', 'the management API is not reachable through the gateway'));
      }
      // Off the allowlist: refused, or under unknown_hosts "ask" let through by a grant, or
      // held below once nothing else would refuse it (issue 26, item 3).
      let askHost: UnknownHost | null = null;
      if (!(await s.ports.egressAllows(id, target.host, target.port))) {
        const unknown = s.ports.unknownHost ? await s.ports.unknownHost(id, target.host, { task_id: this.taskId, session_id: this.sessionId }) : null;
        if (!unknown) return this.refuse(refusal('egress_denied', `${target.host} is not on this environment's egress allowlist`));
        if (unknown.grant) this.hostGranted(unknown);
        else askHost = unknown;
      }
      // A host nobody approved yet is not even looked up (DNS would carry whatever the agent
      // put in its name); refused literals, `localhost` and the service itself still are.
      const pre = await s.upstream.precheck(target.host, target.port, askHost ? { lookup: false } : undefined);
      if (!pre.ok) return this.refuse(refusal(pre.code, pre.reason));

      const creds = await s.ports.credentials(id);
      this.tokens = creds.byToken;
      // A registered MCP server's URL (issue 28): its JSON-RPC body is read whole (up to the scan limit; beyond: unparsable, fail closed).
      if (creds.mcp !== undefined && target.tls) this.mcp = creds.mcp.match(target.host, target.port, pathOnly(url));
      const wantBody = this.hasBody && ((creds.byToken.size > 0 && textual(this.contentType)) || this.mcp !== null || needsBody({ method, host: target.host, path: url, headers: req.headers }));
      if (wantBody) {
        const r = await readUpTo(req, s.scanLimit, this);
        this.body = r.body;
        this.bodyComplete = r.complete;
        this.rest = r.rest;
      }

      const parts = { url, headers: req.headers, body: this.bodyComplete ? this.body : null, contentType: this.contentType };
      const placed = placeCredentials(parts, creds);
      const found = placed.found;
      if (this.mcp === null && creds.mcp !== undefined && target.tls) {
        // A registered server's secret sent to another path of its origin (`/MCP`, `/mcp/`,
        // `//mcp`, `/./mcp`: the same endpoint to many servers' routers) is a request to that
        // server we cannot read as its URL's: its MCP classification, failed closed, never a
        // generic API request's (which would skip its tool rules).
        // Without its secret too: a server registered without one is matched by its path
        // alone, and `/mcp/`, `/MCP`, `/mcp;x` reached its handler as a generic request that
        // no tool rule saw (a fourth review). Any spelling whose loose reading (dot segments,
        // `;` parameters, case, escapes, slashes: minting.ts) is a server's path is its request.
        const origin = creds.mcp.sameOrigin(target.host, target.port);
        let off = origin.find((s) => s.secret !== null && found.some((c) => c.kind === 'secret' && c.connector === `secret:${s.secret}`));
        if (off === undefined && origin.length > 0) {
          const loose = looseSegments(pathOnly(url)).join('/');
          off = origin.find((s) => looseSegments(s.path).join('/') === loose);
        }
        if (off !== undefined) {
          this.mcp = off;
          this.mcpOffPath = true;
        }
      }
      if (this.mcp !== null) {
        const stopped = this.classifyMcp(placed, found);
        if (stopped && stopped !== 'done') return this.refuse(stopped.r, stopped.decision, stopped.reason);
      }
      // A new host is asked about here, after the checks that refuse without asking: a
      // credential is never swapped to it (none allows it: each one's hosts are on the
      // allowlist), so a request carrying one is refused below instead (issue 26, item 3).
      if (askHost && !found.some((c) => !c.hostAllowed(target.host, target.port))) {
        const stopped = await this.askForHost(askHost);
        if (stopped === 'done') return;
        if (stopped) return this.refuse(stopped.r, stopped.decision, stopped.reason);
      }
      if (found.length > 0) {
        const first = found[0]!;
        const path = pathOnly(url);
        const denied = found.find((c) => !c.hostAllowed(target.host, target.port) || (c.pathAllowed !== undefined && !c.pathAllowed(target.host, path)));
        const blame = (c: Credential) => {
          entry.connector = c.connector;
          entry.credential = c.kind;
        };
        // A stand-in of a revoked (or replaced) or failed connection: 401, wherever it is sent.
        const dead = found.find((c) => c.unusable);
        if (dead?.unusable) {
          blame(dead);
          return this.refuse(refusal(dead.unusable, dead.unusable === 'connection_revoked'
            ? `the ${dead.connector} connection of this stand-in was revoked or replaced; the end user must connect again`
            : `the ${dead.connector} connection of this stand-in failed (the provider refused to refresh it); the end user must connect again`));
        }
        // A credential never goes out in cleartext (issue 9, hole 7); said so when the host
        // would otherwise be one of its hosts, else the host is what is wrong.
        if (!target.tls && (!denied || denied.hostAllowed(target.host, 443))) {
          blame(denied ?? first);
          return this.refuse(refusal('cleartext_not_allowed', 'credentials are only sent over TLS: use https://'));
        }
        if (denied) {
          blame(denied);
          const wrongPath = denied.hostAllowed(target.host, target.port);
          return this.refuse(refusal('secret_host_not_allowed', wrongPath
            ? `this stand-in may not be sent to ${hostHeader(target)}${path}: it is for the ${denied.connector} API only`
            : `this credential may not be sent to ${hostHeader(target)}`));
        }
        if (placed.misplaced) {
          blame(placed.misplaced.credential);
          return this.refuse(refusal('secret_location_not_allowed',
            `a credential was found in ${placed.misplaced.where}; it is only swapped into the Authorization header (Bearer, token or Basic) or the places its secret's inject list names`));
        }
        // A swapped secret must not buy the agent a new real credential (OAuth token
        // endpoints, Stripe ephemeral keys, ...: policy-engine/classify/minting.ts).
        const minting = credentialMintingRule({ method, host: target.host, path: url });
        const minter = minting ? found.find((c) => !c.allowMinting) : undefined;
        if (minter) {
          blame(minter);
          return this.refuse(refusal('credential_minting_not_allowed',
            `${method} ${hostHeader(target)}${pathOnly(url)} mints a new credential (${minting}); a secret is swapped into it only when it has allow_minting`));
        }
      }
      // The policy, for each credential used and for an MCP server's tool calls (issue 28).
      if (found.length > 0 || this.mcp !== null) {
        const stopped = await this.authorize(found);
        if (stopped === 'done') return;
        if (stopped) return this.refuse(stopped.r, stopped.decision, stopped.reason);
        const uncounted = await this.settleCounts();
        if (uncounted === 'done') return;
        if (uncounted) return this.refuse(uncounted.r, uncounted.decision, uncounted.reason);
      }

      // Swap (only the slots found above), then forward.
      let outUrl = url;
      let outHeaders: Record<string, string | string[] | undefined> = req.headers;
      if (found.length > 0) {
        const values = new Map<string, string>();
        for (const c of found) {
          try {
            values.set(c.token, await c.value());
          } catch (err) {
            // A connection's token could not be had (revoked meanwhile, or the provider refused
            // the refresh): the agent's error to act on, not a gateway failure.
            const code = (err as { code?: string }).code;
            if (code === 'connection_revoked' || code === 'connection_error') {
              entry.connector = c.connector;
              entry.credential = c.kind;
              return this.refuse(refusal(code, (err as Error).message), entry.decision, code);
            }
            throw err;
          }
        }
        const swapped = swapCredentials(parts, placed, values);
        outUrl = swapped.url;
        outHeaders = swapped.headers;
        if (parts.body) this.body = swapped.body;
        this.redactor = new StreamRedactor(swapped.redactions);
        // A session an upstream opens in answer to the real value is a credential of its own
        // the gateway never sees: later requests carrying only the cookie would pass as
        // `no_credential`, past the policy. Dropped, unless every credential swapped may mint.
        this.dropSetCookie = found.some((c) => !c.allowMinting);
      }
      const headers: Record<string, string | string[]> = {};
      for (const k in outHeaders) {
        const v = outHeaders[k];
        if (v !== undefined && !HOP_BY_HOP.has(k) && !notForwarded(k)) headers[k] = v;
      }
      headers.host = hostHeader(target);
      // An answer that may echo the real value is redacted as it streams; ask for it
      // uncompressed (a compressed one is decoded: Forward).
      if (this.redactor) {
        headers['accept-encoding'] = 'identity';
        // The whole answer, never a slice of it: slices of an echoed value, each shorter than
        // the value, were each passed on unredacted and put back together (a fourth review).
        delete headers.range;
        delete headers['if-range'];
      }
      // A tools/list answer is read for annotations: uncompressed too (issue 28).
      if (this.mcp !== null && this.mcpCls !== null && this.mcpCls.listIds.length > 0) {
        headers['accept-encoding'] = 'identity';
        this.mcpTap = new ToolsListTap(this.mcp, this.mcpCls.listIds);
      }
      let outBody: Dispatcher.DispatchOptions['body'] = null;
      if (this.hasBody) {
        if (this.bodyComplete) {
          const b = this.body ?? Buffer.alloc(0);
          outBody = b;
          headers['content-length'] = String(b.length);
          entry.bytes_in = b.length;
        } else {
          outBody = countedBody(this.rest ?? req, (n) => (entry.bytes_in = n));
        }
      }
      this.upstreamAt = performance.now();
      await new Promise<void>((resolve) => {
        new Forward(this, resolve).start(s.upstream.dispatcher, {
          origin: s.upstream.origin(target.host, target.port, target.tls), path: outUrl, method: method as Dispatcher.HttpMethod, headers, body: outBody,
          // A body on a method that usually has none: an upstream that ignores it would read
          // its bytes as the next request on the connection, and the pool's connections are
          // shared by every environment (a response meant for one tenant answering another).
          // Its connection is not reused (a fourth review; undici's own default for such
          // requests, said here so that it holds whatever undici decides).
          ...(this.hasBody && BODYLESS_METHODS.has(method) ? { reset: true } : {}),
        });
      });
    } catch (err) {
      if ((err as { code?: string }).code === 'GATEWAY_STORE_UNAVAILABLE' || (err as { gatewayUnavailable?: boolean }).gatewayUnavailable) {
        return this.refuse(storeDown('cannot reach its store'));
      }
      s.log.error({ err, host: target.host }, 'gateway pipeline failed');
      if (!this.res.headersSent) return this.refuse(storeDown('could not decide this request'));
      this.res.destroy();
    }
  }

  /**
   * The policy (evaluate), then the spending mandates (issue 26, item 2): each grant with
   * limits that allowed the request is spent with one conditional write
   * (GatewayPorts.consumeGrant) before anything is forwarded. A grant that can no longer
   * take the request (another node spent the last of its total meanwhile, or its limits
   * leave the request out) means the request is not covered after all: the policy is asked
   * again with the grants reloaded (the consume dropped the cache), and the request is held
   * for a new approval like any ask. A request held and approved spends nothing here: its
   * grant was created with that request as its first use.
   */
  async authorize(found: Credential[]): Promise<Stop | null> {
    const { s, id } = this;
    for (let attempt = 1; ; attempt++) {
      this.spend = null;
      const stopped = await this.evaluate(found);
      if (stopped || this.spend === null) return stopped;
      let refused: Spend | null = null;
      for (const sp of this.spend as Spend[]) {
        try {
          if (!(await s.ports.consumeGrant?.(id, sp.grantId, this.facts))) {
            refused = sp;
            break;
          }
        } catch (err) {
          s.log.error({ err }, 'spending a grant failed: failing closed');
          return stop(storeDown('cannot reach its store'));
        }
      }
      if (refused === null) return null;
      // Each refusal means the grant's store row changed (someone else spent it) or the
      // policy still offers a grant that cannot take the request: after a few rounds, ask
      // rather than loop (`once`: the narrowest answer, since the policy's max_scope is not known here).
      if (attempt >= MAX_SPEND_ATTEMPTS) {
        this.entry.decision = 'ask';
        this.entry.reason = 'ask_rule';
        this.entry.grant_id = null;
        const held = await this.hold(refused.c, refused.category, 'once', ...this.mcpHoldOf(refused.c));
        if (held) return held;
        this.entry.decision = 'ask';
        return null;
      }
    }
  }

  /** Policy for each credential used; a Stop when the request must not go on. */
  async evaluate(found: Credential[]): Promise<Stop | null> {
    const { s, entry, target, id, req } = this;
    this.settles = null;
    const lacks = await this.readFacts(found);
    if (lacks) return lacks;
    for (const c of this.mcpSubject !== null ? this.mcpSubjects(found) : found) {
      const mcp = c === this.mcpSubject ? this.mcpCls : null;
      const cls = mcp ?? classify({ method: this.method, host: target.host, path: this.url, headers: req.headers, body: this.bodyComplete ? this.body ?? undefined : undefined }, c.connector);
      entry.connector = c.connector;
      entry.category = cls.category;
      entry.credential = c.kind;
      let d: PolicyDecision;
      try {
        d = await s.ports.decide(id, {
          connector: c.connector, category: cls.category, task_id: this.taskId, session_id: this.sessionId, infrastructure: c.infrastructure, facts: this.facts,
          ...(mcp?.tool !== undefined ? { tool: mcp.tool } : {}),
        });
      } catch (err) {
        s.log.error({ err }, 'policy decision failed: failing closed');
        return stop(storeDown('cannot reach its store'));
      }
      entry.decision = d.decision;
      entry.reason = d.reason;
      entry.matched_rules = d.matched_rules;
      entry.grant_id = d.grant?.id ?? null;
      // A grant with limits is spent right before forwarding (authorize, issue 26 item 2).
      if (d.decision === 'allow' && d.grant?.limits) (this.spend ??= []).push({ grantId: d.grant.id, c, category: cls.category });
      if (d.decision === 'deny') return stop(refusal('policy_denied', `policy denies ${cls.category} on ${c.connector} (${d.reason})`), 'deny', d.reason);
      if (d.decision === 'ask') {
        // Held requests are buffered whole, so the approved request is the one that was asked about.
        if (!this.bodyComplete) {
          const r = await this.readOn(s.holdLimit);
          if (!r.complete) return this.tooLargeToHold(r.overBudget);
          this.body = r.body;
          this.bodyComplete = true;
          this.rest = undefined;
        }
        const stopped = await this.hold(c, cls.category, d.max_scope ?? 'permanent', mcp ? this.mcpDetails() : undefined, mcp?.tool);
        if (stopped) return stopped;
        entry.decision = 'ask';
      }
      if (d.settle) (this.settles ??= []).push({ c, category: cls.category, settle: d.settle, approved: d.decision === 'ask' });
    }
    return null;
  }

  /**
   * The request's decoded facts (issue 26, item 1) for rule conditions and grant limits,
   * from the agent's own bytes (before any swap). A request the decoders read (Stripe
   * writes, Gmail sends, calendar event writes, Slack calls) is buffered whole first, up to
   * the hold limit; one larger streams on with facts it could not read (the riskier reading).
   */
  async readFacts(found: Credential[]): Promise<Stop | null> {
    const { target, req } = this;
    const head = { method: this.method, host: target.host, path: this.url, headers: req.headers };
    if (this.hasBody && !this.bodyComplete && factsNeedBody(head)) {
      const r = await this.readOn(this.s.holdLimit);
      if (r.complete) {
        this.body = r.body;
        this.bodyComplete = true;
        this.rest = undefined;
      } else this.rest = r.rest;
    }
    const body = this.bodyComplete ? this.body ?? undefined : undefined;
    this.facts = this.hasBody && body === undefined
      ? { amount: null, recipients: null, channel: null }
      : factsOf({ ...head, body }, found[0]?.connector ?? '');
    return null;
  }

  /**
   * count_over rules (issue 26, item 1): each counted decision is settled right before the
   * request is forwarded, atomically across nodes. A deny under fresh counts refuses it; an
   * ask it was not held for (another node reached the count meanwhile) holds it now.
   */
  async settleCounts(): Promise<Stop | null> {
    const { s, entry } = this;
    for (const it of this.settles ?? []) {
      for (let round = 1; ; round++) {
        let d: Omit<PolicyDecision, 'settle'> | null;
        try {
          d = await it.settle(it.approved);
        } catch (err) {
          s.log.error({ err }, 'counting the request failed: failing closed');
          return stop(storeDown('cannot reach its store'));
        }
        if (d === null) break;
        entry.connector = it.c.connector;
        entry.category = it.category;
        entry.credential = it.c.kind;
        entry.decision = d.decision;
        entry.reason = d.reason;
        entry.matched_rules = d.matched_rules;
        entry.grant_id = d.grant?.id ?? null;
        if (d.decision !== 'ask' || round > 2) return stop(refusal('policy_denied', `policy denies ${it.category} on ${it.c.connector} (${d.reason})`), 'deny', d.reason);
        if (!this.bodyComplete) {
          const r = await this.readOn(s.holdLimit);
          if (!r.complete) return this.tooLargeToHold(r.overBudget);
          this.body = r.body;
          this.bodyComplete = true;
          this.rest = undefined;
        }
        const stopped = await this.hold(it.c, it.category, d.max_scope ?? 'permanent', ...this.mcpHoldOf(it.c));
        if (stopped) return stopped;
        entry.decision = 'ask';
        it.approved = true;
      }
    }
    return null;
  }

  /**
   * A request to a registered MCP server (issue 28, docs/mcp.md): its JSON-RPC messages are
   * classified (policy-engine/classify/mcp.ts) and the policy sees connector `mcp:<name>`
   * and the tool; the server's secret is swapped in only from `Authorization`.
   */
  classifyMcp(placed: ReturnType<typeof placeCredentials>, found: Credential[]): Stop | null {
    const mcp = this.mcp!;
    const cls: McpClassification = this.mcpOffPath
      ? { category: FAIL_CLOSED_CATEGORY, rule: 'mcp.off_path', ids: [], listIds: [], batch: false }
      : classifyMcp({ method: this.method, headers: this.req.headers, body: this.bodyComplete ? this.body ?? undefined : undefined }, mcp);
    this.mcpCls = cls;
    if (cls.tool !== undefined) this.entry.tool = cls.tool;
    const secret = mcp.secret === null ? undefined : found.find((c) => c.kind === 'secret' && c.connector === `secret:${mcp.secret}`);
    this.entry.connector = `mcp:${mcp.name}`;
    this.entry.category = cls.category;
    // The policy's subject: a Credential in shape only (nothing of it is swapped).
    this.mcpSubject = {
      token: '', connector: `mcp:${mcp.name}`, kind: (secret ? 'secret' : 'none') as Credential['kind'], infrastructure: false,
      hostAllowed: () => false, slots: [], allowMinting: false, value: () => '',
    };
    if (secret && mcpSecretMisplaced(placed, secret.token)) {
      this.entry.credential = 'secret';
      return stop(refusal('secret_location_not_allowed', `the ${mcp.name} MCP server's credential is only swapped into the Authorization header (Bearer)`));
    }
    return null;
  }

  /** The card and tool of a hold about the MCP subject (issue 28); nothing for any other credential. */
  mcpHoldOf(c: Credential): [RequestDetails?, string?] {
    return c === this.mcpSubject && c !== null ? [this.mcpDetails(), this.mcpCls?.tool] : [];
  }

  /** Who the policy is asked about for an MCP request: the server (its tool calls), then any other credential it carries. */
  mcpSubjects(found: Credential[]): Credential[] {
    const mcp = this.mcp!;
    return [this.mcpSubject!, ...found.filter((c) => !(c.kind === 'secret' && c.connector === `secret:${mcp.secret}`))];
  }

  /** The card of a held MCP request: the server, each tool called and its arguments (policy-engine describeMcpRequest). */
  mcpDetails(): RequestDetails {
    const d = describeMcpRequest({ method: this.method, headers: this.req.headers, body: this.body ?? undefined }, { server: this.mcp!.name, hide: [...this.tokens.keys()] });
    // Whatever its body says, it went elsewhere than the server's URL: the card must not show it as a plain tool call.
    return this.mcpOffPath ? { ...d, unreadable: 'the request went to another path of the server than its registered URL\'s, so it could not be read as MCP: it is treated as the riskiest kind of call' } : d;
  }

  /** A host off the allowlist that a grant of an earlier egress approval lets through (issue 26, item 3). */
  hostGranted(u: UnknownHost): void {
    const { entry } = this;
    entry.connector = u.connector;
    entry.category = u.category;
    entry.reason = 'egress_grant';
    entry.grant_id = u.grant?.id ?? null;
  }

  /**
   * A host off the allowlist under `unknown_hosts: "ask"` (issue 26, item 3): held like a
   * policy ask (buffered whole; denied → 403 `approval_denied`, expired → `approval_expired`),
   * as connector `egress:<host>`, category `connect`, any scope. Approved: the pipeline goes
   * on as for an allowed host, whose name is only now looked up and checked.
   */
  async askForHost(u: UnknownHost): Promise<Stop | null> {
    const { s, entry, target } = this;
    entry.connector = u.connector;
    entry.category = u.category;
    if (!this.bodyComplete) {
      const r = await this.readOn(s.holdLimit);
      if (!r.complete) return this.tooLargeToHold(r.overBudget);
      this.body = r.body;
      this.bodyComplete = true;
      this.rest = undefined;
    }
    const stopped = await this.hold(u, u.category, 'permanent', this.hostDetails());
    if (stopped) return stopped;
    entry.decision = 'ask';
    entry.reason = 'egress_ask';
    const pre = await s.upstream.precheck(target.host, target.port);
    if (!pre.ok) return stop(refusal(pre.code, pre.reason));
    return null;
  }

  /** The card of an egress approval: the new host and what would be sent there (no query string, no body text). */
  hostDetails(): RequestDetails {
    const { target } = this;
    const cut = (v: string) => (v.length > MAX_DETAIL_VALUE ? `${v.slice(0, MAX_DETAIL_VALUE)}… (${v.length - MAX_DETAIL_VALUE} more characters)` : v);
    const fields = [
      { label: 'New host', value: target.host },
      { label: 'Port', value: String(target.port) },
      { label: 'Request', value: cut(`${this.method} ${pathOnly(this.url)}`) },
    ];
    if (this.body && this.body.length > 0) fields.push({ label: 'Body', value: cut(`${this.body.length} bytes${this.contentType ? ` (${this.contentType})` : ''}`) });
    return { kind: 'new_host', fields };
  }

  /** Creates the approval and waits for its decision; null when approved. `given`: the card's details (else decoded from the request). */
  async hold(c: Pick<Credential, 'connector'>, category: string, maxScope: string, given?: RequestDetails, tool?: string): Promise<Stop | null> {
    const { s, entry, target, id, res } = this;
    let approvalId: string;
    // The body here is the agent's own (held requests are classified before any swap).
    let details: RequestDetails | null = null;
    try {
      details = given ?? describeRequest(
        { method: this.method, host: target.host, path: this.url, headers: this.req.headers, body: this.body ?? undefined },
        { hide: [...this.tokens.keys()] },
      );
    } catch (err) {
      // The card says so rather than showing nothing to warn of (issue 23, item 5).
      details = { kind: 'unknown', fields: [], unreadable: 'the request could not be decoded' };
      s.log.warn({ err }, 'approval details could not be decoded');
    }
    try {
      approvalId = (
        await s.ports.requestApproval(id, {
          connector: c.connector, category, method: this.method, host: target.host, path: pathOnly(this.url), task_id: this.taskId,
          session_id: this.sessionId, max_scope: maxScope, details, facts: this.facts, ...(tool !== undefined ? { tool } : {}),
        })
      ).id;
    } catch (err) {
      s.log.error({ err }, 'approval could not be created: failing closed');
      return stop(storeDown('cannot reach its store'));
    }
    entry.approval_id = approvalId;
    const abort = new AbortController();
    const onClose = () => {
      if (!res.writableEnded) abort.abort();
    };
    res.once('close', onClose);
    s.life.held.add(abort);
    // gateway_held_requests and gateway_approval_wait_seconds (issue 25, item 2).
    const heldAt = performance.now();
    let decidedAfterMs = -1;
    s.metrics.holdStarted();
    let outcome: ApprovalOutcome;
    try {
      // A node that began stopping while the approval was created answers at once.
      if (s.life.draining) abort.abort(STOPPING_ABORT);
      outcome = await s.ports.waitForDecision(approvalId, abort.signal);
      decidedAfterMs = performance.now() - heldAt;
      this.heldMs += decidedAfterMs;
    } catch (err) {
      this.heldMs += performance.now() - heldAt; // before agentGone() below finishes the exchange
      // The node stops (issue 25, item 7): the approval stays decidable; the agent is told to
      // send the request again (the decision, if approved for a scope, grants the retry).
      if (abort.signal.aborted && abort.signal.reason === STOPPING_ABORT) return stop(STOPPING, 'ask', 'gateway_stopping');
      if (abort.signal.aborted) {
        // The agent went away; the approval stays decidable. Nothing to answer.
        await this.agentGone();
        return 'done';
      }
      s.log.error({ err }, 'waiting for a decision failed: failing closed');
      return stop(storeDown('lost track of the approval'), 'ask', 'ask_rule');
    } finally {
      res.off('close', onClose);
      s.life.held.delete(abort);
      s.metrics.holdEnded(decidedAfterMs < 0 ? null : decidedAfterMs / 1000);
    }
    entry.grant_id = outcome.grant_id;
    if (outcome.status === 'denied') return stop(refusal('approval_denied', 'the request was denied by a human'), 'ask', 'approval_denied');
    if (outcome.status === 'expired') return stop(refusal('approval_expired', 'nobody decided in time'), 'ask', 'approval_expired');
    return null;
  }
}

export function createPipeline(opts: PipelineOptions) {
  const settings: Settings = {
    ports: opts.ports,
    upstream: opts.upstream,
    log: opts.log,
    managementTargets: opts.managementTargets,
    scanLimit: opts.scanLimitBytes ?? 1024 * 1024,
    holdLimit: opts.holdLimitBytes ?? 10 * 1024 * 1024,
    bodies: new BodyBudget(opts.bodyBudget?.perEnvironmentBytes ?? 64 * 1024 * 1024, opts.bodyBudget?.totalBytes ?? 512 * 1024 * 1024),
    metrics: opts.metrics ?? noopMetrics,
    life: new Lifecycle(),
  };
  const { life } = settings;
  function handle(req: IncomingMessage, res: ServerResponse, target: Target, id: Identity): Promise<void> {
    const x = new Exchange(settings, req, res, target, id);
    life.active++;
    if (life.draining) {
      // A request on a kept-alive connection after the stop began: refused (audited), and the connection ends.
      res.shouldKeepAlive = false;
      return x.refuse(STOPPING, 'deny', 'gateway_stopping').then(life.done, life.done);
    }
    const ended = (): void => {
      x.releaseBody();
      life.done();
    };
    return x.run().then(ended, ended);
  }
  return Object.assign(handle, {
    /** Graceful stop (issue 25, item 7): see Lifecycle.drain. */
    drain: (graceMs: number) => life.drain(graceMs),
    /** Exchanges running now (held ones included). */
    active: () => life.active,
  });
}

export type Pipeline = ReturnType<typeof createPipeline>;
