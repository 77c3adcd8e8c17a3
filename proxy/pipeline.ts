import type { IncomingMessage, ServerResponse, IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { classify, needsBody } from '../policy-engine/classify/index.js';
import type { Logger } from '../lib/log.js';
import type { AuditEntryInput } from '../audit/entry.js';
import type { Upstream } from './upstream.js';
import { detectCredentials, swapCredentials, type Credential, type CredentialSet } from './credentials.js';
import { refusal, sendRefusal, type Refusal } from './refusal.js';

/**
 * The request pipeline of the gateway, in the order of ARCHITECTURE.md: authenticate (done
 * by the caller) → allowlist → detect credential → classify → evaluate → hold → swap →
 * forward → audit. Every request ends in exactly one audit entry with a fixed reason.
 */
export interface Identity {
  environmentId: string;
  developerId: string;
}

export interface Target {
  host: string;
  port: number;
  tls: boolean;
}

export type Verdict = 'allow' | 'deny' | 'ask';

export interface PolicyDecision {
  decision: Verdict;
  reason: string;
  matched_rules: number[];
  max_scope?: string;
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
  egressAllows(id: Identity, host: string): Promise<boolean>;
  credentials(id: Identity): Promise<CredentialSet>;
  decide(id: Identity, req: { connector: string; category: string; task_id?: string; session_id?: string; infrastructure: boolean }): Promise<PolicyDecision>;
  requestApproval(
    id: Identity,
    req: { connector: string; category: string; method: string; host: string; path: string; task_id?: string; session_id?: string; max_scope: string },
  ): Promise<{ id: string }>;
  waitForDecision(approvalId: string, signal: AbortSignal): Promise<ApprovalOutcome>;
  audit(entry: AuditEntry): void;
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
}

const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'x-service-task-id', 'x-service-session-id', 'host',
]);
const RESPONSE_HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'trailer', 'upgrade']);

function textual(contentType: string | undefined): boolean {
  const t = (contentType ?? '').toLowerCase();
  return t === '' || t.includes('json') || t.startsWith('text/') || t.startsWith('application/x-www-form-urlencoded') || t.startsWith('multipart/') || t.includes('xml');
}

function headerOnce(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Reads up to `limit` bytes; `rest` is a stream of the whole body when it was longer. */
async function readUpTo(req: AsyncIterable<unknown>, limit: number): Promise<{ body: Buffer; complete: boolean; rest?: Readable }> {
  const chunks: Buffer[] = [];
  let size = 0;
  const it = req[Symbol.asyncIterator]();
  for (;;) {
    const { value, done } = await it.next();
    if (done) return { body: Buffer.concat(chunks, size), complete: true };
    const chunk = value as Buffer;
    chunks.push(chunk);
    size += chunk.length;
    if (size > limit) {
      const prefix = Buffer.concat(chunks, size);
      async function* all() {
        yield prefix;
        for (;;) {
          const n = await it.next();
          if (n.done) return;
          yield n.value as Buffer;
        }
      }
      return { body: prefix, complete: false, rest: Readable.from(all()) };
    }
  }
}

/**
 * The request target in origin-form. An absolute-form target (`GET https://host/path`),
 * which a server must accept (RFC 9112 section 3.2.2), keeps its path and query; before,
 * every target not starting with `/` became `/`, so such a request was classified and
 * forwarded as a request for `/`. The host part is ignored: the tunnel decides the host.
 */
function originForm(target: string | undefined): string {
  if (!target) return '/';
  if (target.startsWith('/')) return target;
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*([^#]*)/i.exec(target);
  const rest = m ? m[1]! : target.startsWith('?') ? target : '';
  return rest.startsWith('/') ? rest : `/${rest}`;
}

function pathOnly(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

function upstreamError(err: unknown): Refusal {
  const e = err as { code?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (code === 'EGRESS_PRIVATE_ADDRESS') return refusal('egress_denied', (err as Error).message);
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return refusal('upstream_timeout', 'the upstream did not answer in time');
  }
  return refusal('upstream_unreachable', 'the upstream could not be reached');
}

/**
 * Sends the request upstream and streams the answer into the agent's response, then calls
 * `finish` (the audit entry) once; `refuse` when nothing reached the agent yet. An undici
 * dispatch handler rather than `request()` and a pipe: no Readable body stream, promise and
 * pipe bookkeeping per request (docs/performance.md). Backpressure: the upstream is paused
 * while the agent's socket buffer is full. The agent going away aborts the upstream request.
 */
function forward(
  dispatcher: Dispatcher,
  opts: Dispatcher.DispatchOptions,
  res: ServerResponse,
  entry: AuditEntry,
  refuse: (r: Refusal) => void,
  finish: (status: number) => void,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let controller: Dispatcher.DispatchController | null = null;
    let status = 0;
    let out = 0;
    let started = false; // response headers written to the agent
    let complete = false; // the upstream's body ended
    let done = false;
    const settle = (fn: () => void) => {
      if (done) return;
      done = true;
      res.off('close', onClose);
      res.off('drain', onDrain);
      try {
        fn();
      } finally {
        resolve();
      }
    };
    const delivered = () => {
      entry.bytes_out = out;
      finish(status);
    };
    const onDrain = () => controller?.resume();
    function onClose(): void {
      if (done) return;
      if (complete) return settle(delivered); // closed before 'finish' could be emitted
      // Aborting makes undici call onResponseError, which settles. Before undici started the
      // request (queued for a connection), it is aborted as soon as it starts.
      if (controller) controller.abort(new Error('the agent closed the connection'));
    }
    const agentGone = () => {
      entry.reason = 'client_disconnected';
      entry.bytes_out = out;
      finish(499);
    };
    res.on('close', onClose);
    dispatcher.dispatch(opts, {
      onRequestStart(c) {
        controller = c;
        if (res.destroyed) c.abort(new Error('the agent closed the connection'));
      },
      onResponseStart(c, statusCode, headers) {
        if (statusCode < 200) return; // 1xx: the final answer follows
        const h: Record<string, string | string[]> = {};
        for (const k in headers) {
          const v = headers[k];
          if (v !== undefined && !RESPONSE_HOP_BY_HOP.has(k)) h[k] = v;
        }
        try {
          res.writeHead(statusCode, h);
        } catch (err) {
          return c.abort(err as Error); // a header Node will not send: 502 below
        }
        started = true;
        status = statusCode;
        entry.upstream_status = statusCode;
      },
      onResponseData(c, chunk) {
        out += chunk.length;
        if (!res.write(chunk) && !c.paused) {
          c.pause();
          res.once('drain', onDrain);
        }
      },
      onResponseEnd() {
        complete = true;
        res.end(() => settle(delivered));
      },
      onResponseError(_c, err) {
        if (!started && res.destroyed) return settle(agentGone);
        if (started) {
          return settle(() => {
            res.destroy();
            delivered();
          });
        }
        settle(() => refuse(upstreamError(err)));
      },
    });
  });
}

export function createPipeline(opts: PipelineOptions) {
  const { ports, upstream, log } = opts;
  const scanLimit = opts.scanLimitBytes ?? 1024 * 1024;
  const holdLimit = opts.holdLimitBytes ?? 10 * 1024 * 1024;

  return async function handle(req: IncomingMessage, res: ServerResponse, target: Target, id: Identity): Promise<void> {
    const started = performance.now();
    const method = (req.method ?? 'GET').toUpperCase();
    const url = originForm(req.url);
    const entry: AuditEntry = {
      environment_id: id.environmentId, developer_id: id.developerId, method, host: target.host, path: url,
      connector: null, category: null, credential: 'none', decision: 'allow', reason: 'no_credential', matched_rules: [],
      approval_id: null, grant_id: null, status: 0, upstream_status: null, bytes_in: 0, bytes_out: 0, duration_ms: 0,
    };
    const finish = (status: number) => {
      entry.status = status;
      entry.duration_ms = Math.round(performance.now() - started);
      try {
        ports.audit(entry);
      } catch (err) {
        log.error({ err }, 'audit entry could not be queued');
      }
    };
    const taskId = headerOnce(req.headers, 'x-service-task-id') || undefined;
    const sessionId = headerOnce(req.headers, 'x-service-session-id') || undefined;
    const contentType = headerOnce(req.headers, 'content-type');
    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
    let body: Buffer | null = null;
    let bodyComplete = !hasBody;
    let rest: Readable | undefined;

    const refuse = (r: Refusal, decision: Verdict = 'deny', reason: string = r.code) => {
      entry.decision = decision;
      entry.reason = reason;
      finish(sendRefusal(req, res, r));
    };

    try {
      if (opts.managementTargets.has(`${target.host.toLowerCase()}:${target.port}`)) {
        return refuse(refusal('egress_denied', 'the management API is not reachable through the gateway'));
      }
      if (!(await ports.egressAllows(id, target.host))) {
        return refuse(refusal('egress_denied', `${target.host} is not on this environment's egress allowlist`));
      }
      const pre = await upstream.precheck(target.host);
      if (!pre.ok) return refuse(refusal('egress_denied', pre.reason));

      const creds = await ports.credentials(id);
      const classifyInput = { method, host: target.host, path: url, headers: req.headers };
      const wantBody = hasBody && ((creds.byToken.size > 0 && textual(contentType)) || needsBody(classifyInput));
      if (wantBody) {
        const r = await readUpTo(req, scanLimit);
        body = r.body;
        bodyComplete = r.complete;
        rest = r.rest;
      }

      const found = detectCredentials({ url, headers: req.headers, body: bodyComplete ? body : null }, creds);
      const denied = found.find((c) => !c.hostAllowed(target.host));
      if (denied) {
        entry.connector = denied.connector;
        entry.credential = denied.kind;
        return refuse(refusal('secret_host_not_allowed', `this credential may not be sent to ${target.host}`));
      }

      if (found.length > 0) {
        const verdict = await evaluate(found);
        if (verdict) return verdict();
      }

      // Swap, then forward.
      const values = new Map<string, string>();
      for (const c of found) values.set(c.token, await c.value());
      let outUrl = url;
      let outHeaders: Record<string, string | string[] | undefined> = req.headers;
      if (values.size > 0) {
        const swapped = swapCredentials({ url, headers: req.headers, body: bodyComplete ? body : null, contentType }, values);
        outUrl = swapped.url;
        outHeaders = swapped.headers;
        if (bodyComplete) body = swapped.body;
      }
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(outHeaders)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
      headers.host = headerOnce(req.headers, 'host') ?? (target.port === (target.tls ? 443 : 80) ? target.host : `${target.host}:${target.port}`);
      let outBody: Dispatcher.DispatchOptions['body'] = null;
      if (hasBody) {
        if (bodyComplete) {
          outBody = body ?? Buffer.alloc(0);
          headers['content-length'] = String((outBody as Buffer).length);
        } else {
          outBody = rest ?? req;
        }
      }
      if (outBody && !bodyComplete) {
        let n = 0;
        const counted = outBody as Readable;
        counted.on('data', (c: Buffer) => (n += c.length));
        counted.once('end', () => (entry.bytes_in = n));
      } else if (outBody) {
        entry.bytes_in = (outBody as Buffer).length;
      }

      await forward(
        upstream.dispatcher,
        { origin: upstream.origin(target.host, target.port, target.tls), path: outUrl, method: method as Dispatcher.HttpMethod, headers, body: outBody },
        res,
        entry,
        (r) => refuse(r, entry.decision, r.code),
        finish,
      );
    } catch (err) {
      if ((err as { code?: string }).code === 'GATEWAY_STORE_UNAVAILABLE' || (err as { gatewayUnavailable?: boolean }).gatewayUnavailable) {
        return refuse(refusal('gateway_unavailable', 'the gateway cannot reach its store; nothing was forwarded'));
      }
      log.error({ err, host: target.host }, 'gateway pipeline failed');
      if (!res.headersSent) return refuse(refusal('gateway_unavailable', 'the gateway could not decide this request; nothing was forwarded'));
      res.destroy();
    }

    /** Policy for each credential used; returns a responder when the request must stop. */
    async function evaluate(found: Credential[]): Promise<(() => void) | null> {
      for (const c of found) {
        const cls = classify({ method, host: target.host, path: url, headers: req.headers, body: bodyComplete ? body ?? undefined : undefined }, c.connector);
        entry.connector = c.connector;
        entry.category = cls.category;
        entry.credential = c.kind;
        let d: PolicyDecision;
        try {
          d = await ports.decide(id, { connector: c.connector, category: cls.category, task_id: taskId, session_id: sessionId, infrastructure: c.infrastructure });
        } catch (err) {
          log.error({ err }, 'policy decision failed: failing closed');
          return () => refuse(refusal('gateway_unavailable', 'the gateway cannot reach its store; nothing was forwarded'));
        }
        entry.decision = d.decision;
        entry.reason = d.reason;
        entry.matched_rules = d.matched_rules;
        entry.grant_id = d.grant?.id ?? null;
        if (d.decision === 'deny') return () => refuse(refusal('policy_denied', `policy denies ${cls.category} on ${c.connector} (${d.reason})`), 'deny', d.reason);
        if (d.decision === 'ask') {
          // Held requests are buffered whole, so the approved request is the one that was asked about.
          if (!bodyComplete) {
            const r = await readUpTo(rest ?? req, holdLimit);
            if (!r.complete) return () => refuse(refusal('payload_too_large', `a request held for approval may carry at most ${holdLimit} bytes`), 'deny', 'payload_too_large');
            body = r.body;
            bodyComplete = true;
            rest = undefined;
          }
          const outcome = await hold(c, cls.category, d);
          if (outcome) return outcome;
          entry.decision = 'ask';
        }
      }
      return null;
    }

    async function hold(c: Credential, category: string, d: PolicyDecision): Promise<(() => void) | null> {
      let approval: { id: string };
      try {
        approval = await ports.requestApproval(id, {
          connector: c.connector, category, method, host: target.host, path: pathOnly(url), task_id: taskId, session_id: sessionId,
          max_scope: d.max_scope ?? 'permanent',
        });
      } catch (err) {
        log.error({ err }, 'approval could not be created: failing closed');
        return () => refuse(refusal('gateway_unavailable', 'the gateway cannot reach its store; nothing was forwarded'));
      }
      entry.approval_id = approval.id;
      const abort = new AbortController();
      const onClose = () => {
        if (!res.writableEnded) abort.abort();
      };
      res.once('close', onClose);
      let outcome: ApprovalOutcome;
      try {
        outcome = await ports.waitForDecision(approval.id, abort.signal);
      } catch (err) {
        if (abort.signal.aborted) {
          // The agent went away; the approval stays decidable. Nothing to answer.
          entry.reason = 'client_disconnected';
          finish(499);
          return () => undefined;
        }
        log.error({ err }, 'waiting for a decision failed: failing closed');
        return () => refuse(refusal('gateway_unavailable', 'the gateway lost track of the approval; nothing was forwarded'), 'ask', 'ask_rule');
      } finally {
        res.off('close', onClose);
      }
      entry.grant_id = outcome.grant_id;
      if (outcome.status === 'denied') return () => refuse(refusal('approval_denied', 'the request was denied by a human'), 'ask', 'approval_denied');
      if (outcome.status === 'expired') return () => refuse(refusal('approval_expired', 'nobody decided in time'), 'ask', 'approval_expired');
      return null;
    }
  };
}

export type Pipeline = ReturnType<typeof createPipeline>;
