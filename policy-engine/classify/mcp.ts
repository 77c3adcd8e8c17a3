/**
 * MCP (Model Context Protocol, Streamable HTTP transport) as the gateway reads it (issue 28;
 * docs/mcp.md): a request to a registered MCP server's URL is JSON-RPC 2.0, one message or
 * a batch, and its category follows what the messages do, not the HTTP verb.
 *
 * PURE: functions of the request (and of the server's table) alone. The agent wrote every
 * byte read here and is treated as an attacker: the body is read one way or not at all. A
 * compressed body, bytes that are not UTF-8, JSON that repeats a key (two `name`s in a
 * tools/call: which one the server runs is its choice), more than MAX_MCP_BATCH messages,
 * a message that is not JSON-RPC 2.0, a tool name outside TOOL_NAME or a method we do not
 * know make the request unparsable, and an unparsable request takes FAIL_CLOSED_CATEGORY.
 *
 *   initialize, ping, the list methods, resources/read, prompts/get, completion/complete,
 *    logging/setLevel, resources/(un)subscribe, notifications, responses   read
 *   tools/call <name>   the developer's map → the server's annotations seen in an earlier
 *                       tools/list answer (readOnlyHint → read, destructiveHint → delete,
 *                       otherwise write) → default_category → FAIL_CLOSED_CATEGORY
 *   a batch             its riskiest message (DANGER_ORDER)
 *   GET (the server's event stream), DELETE (ends the session), OPTIONS   read
 */
import { dangerRank, isCategory, type Category } from '../categories.js';
import { bodyTextStrict, contentEncoded, foldKey, hasDuplicateKeys } from './http.js';
import type { ClassifyRequest } from './types.js';

/** What an unknown tool or an unreadable request is taken for: the top of DANGER_ORDER (never allowed by a rule alone). */
export const FAIL_CLOSED_CATEGORY: Category = 'change_permission';
/** Messages in one batch; more is unparsable (a batch is judged whole, and read whole). */
export const MAX_MCP_BATCH = 100;
/**
 * Tool names the gateway accepts (the MCP spec's SHOULD: 1 to 128 of A-Z a-z 0-9 _ - .,
 * plus `/`). No comma, so a batch's tool list (`a,b`) can never be spelled by one name,
 * and no control or invisible character that could make a card or a rule lie.
 */
export const TOOL_NAME = /^[A-Za-z0-9_./-]{1,128}$/;
/** An answer to tools/list is read up to this many bytes for annotations; past it nothing is learned. */
export const MAX_TOOLS_LIST_ANSWER = 1024 * 1024;

const READ_METHODS: ReadonlySet<string> = new Set([
  'initialize', 'ping', 'tools/list', 'resources/list', 'resources/templates/list', 'resources/read', 'resources/subscribe',
  'resources/unsubscribe', 'prompts/list', 'prompts/get', 'completion/complete', 'logging/setLevel',
]);

/** The developer's table for one registered server, and what the gateway learned from its answers. */
export interface McpToolTable {
  /** The registration's name: the policy connector is `mcp:<name>`. */
  readonly name: string;
  /** The developer's map, tool name → category. */
  readonly tools: ReadonlyMap<string, Category>;
  readonly defaultCategory: Category | null;
  /** The category the server's own annotations give the tool (read, write or delete), from an earlier tools/list answer of this server. */
  annotated(tool: string): Category | undefined;
}

export type JsonRpcId = string | number;

export interface McpMessage {
  /** The method; '' for a response (the client answering a request of the server). */
  readonly method: string;
  /** Absent on a notification or a response. */
  readonly id?: JsonRpcId;
  /** tools/call: params.name as sent (maybe not a TOOL_NAME). */
  readonly tool?: string;
  /** tools/call: params.arguments as sent. */
  readonly arguments?: unknown;
}

export type McpParse =
  | { readonly ok: true; readonly batch: boolean; readonly messages: readonly McpMessage[] }
  | { readonly ok: false; readonly why: string; readonly messages: readonly McpMessage[] };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function validId(v: unknown): v is JsonRpcId {
  return (typeof v === 'string' && v.length <= 256) || (typeof v === 'number' && Number.isFinite(v));
}

/**
 * The JSON-RPC messages of a request body, read strictly. `messages` holds what could be
 * read even when `ok` is false (the approval card shows it, escaped).
 */
/** JSON-RPC 2.0 message members, and the MCP request params the classifier reads. */
const MESSAGE_KEYS = new Set(['jsonrpc', 'id', 'method', 'params', 'result', 'error']);
const PARAMS_KEYS = new Set(['name', 'arguments', '_meta']);

/** Whether `o` has a key that is one of `known` only when case-folded. */
function caseVariantOf(o: Record<string, unknown>, known: ReadonlySet<string>): boolean {
  for (const k of Object.keys(o)) if (!known.has(k) && known.has(foldKey(k))) return true;
  return false;
}

export function parseMcpBody(body: ClassifyRequest['body'], headers: ClassifyRequest['headers']): McpParse {
  const messages: McpMessage[] = [];
  const fail = (why: string): McpParse => ({ ok: false, why, messages });
  if (contentEncoded(headers)) return fail('the body is compressed');
  if (body === undefined) return fail('the body was not read (too large)');
  const text = bodyTextStrict(body, headers);
  if (text === undefined) return fail('the body is not UTF-8 text');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return fail('the body is not JSON');
  }
  const batch = Array.isArray(value);
  const list: unknown[] = batch ? (value as unknown[]) : [value];
  if (list.length === 0) return fail('an empty batch');
  if (list.length > MAX_MCP_BATCH) return fail(`a batch of more than ${MAX_MCP_BATCH} messages`);
  // Keys compared case-folded: a server decoding with Go's encoding/json matches `Method`
  // to `method` (and the last of two wins), so `{"method":"ping","Method":"tools/call"}`
  // is a tool call there, whatever we would read.
  let why: string | null = hasDuplicateKeys(text, true) ? 'the JSON repeats a key (in some letter case)' : null;
  for (const m of list) {
    if (!isObject(m) || m.jsonrpc !== '2.0') {
      why ??= 'a message is not JSON-RPC 2.0';
      continue;
    }
    // A member named in another letter case (`Method` alone, `Params`) is the member to a
    // case-insensitive decoder and unknown to us: one reading only, or none.
    if (caseVariantOf(m, MESSAGE_KEYS) || (isObject(m.params) && caseVariantOf(m.params, PARAMS_KEYS))) {
      why ??= 'a key differs from a JSON-RPC or MCP member only in letter case';
      continue;
    }
    if (m.id !== undefined && !validId(m.id)) why ??= 'a message id is not a string or a number';
    const id = validId(m.id) ? m.id : undefined;
    if (m.method === undefined) {
      // A response: the client answering a request of the server (sampling, elicitation).
      if (id === undefined || (m.result === undefined && m.error === undefined)) why ??= 'a message has neither a method nor a result';
      messages.push({ method: '', ...(id !== undefined ? { id } : {}) });
      continue;
    }
    if (typeof m.method !== 'string') {
      why ??= 'a method is not a string';
      continue;
    }
    if (m.method === 'tools/call') {
      const p = m.params;
      const tool = isObject(p) && typeof p.name === 'string' ? p.name : undefined;
      if (tool === undefined) why ??= 'a tools/call names no tool';
      else if (!TOOL_NAME.test(tool)) why ??= 'a tool name is not a valid MCP tool name';
      if (isObject(p) && p.arguments !== undefined && !isObject(p.arguments)) why ??= 'tool arguments are not an object';
      if (id === undefined) why ??= 'a tools/call without an id';
      messages.push({ method: m.method, ...(id !== undefined ? { id } : {}), ...(tool !== undefined ? { tool } : {}), ...(isObject(p) ? { arguments: p.arguments } : {}) });
      continue;
    }
    if (!READ_METHODS.has(m.method) && !m.method.startsWith('notifications/')) why ??= `the method ${JSON.stringify(m.method.slice(0, 64))} is not one the gateway knows`;
    messages.push({ method: m.method, ...(id !== undefined ? { id } : {}) });
  }
  return why === null ? { ok: true, batch, messages } : fail(why);
}

export interface McpClassification {
  readonly category: Category;
  /** The deciding row: `mcp.read`, `mcp.tool.map`, `mcp.tool.annotation`, `mcp.tool.default`, `mcp.tool.unknown`, `mcp.unparsable`, ... */
  readonly rule: string;
  /**
   * The tool(s) the policy sees (a rule's `tool`, a grant's tool): the one tool called, or
   * for a batch calling several, their distinct names sorted and joined with `,` (a rule
   * never names that; a grant covers exactly that set). Absent: no tool is called, or the
   * request could not be read.
   */
  readonly tool?: string;
  /** Ids of the requests in it (a refusal answers each with a JSON-RPC error); empty for notifications only. */
  readonly ids: readonly JsonRpcId[];
  /** Ids of its tools/list requests: their answers are read for annotations. */
  readonly listIds: readonly JsonRpcId[];
  readonly batch: boolean;
}

/** The category of one tool: the developer's map, then the server's annotations, then the default, then fail closed. */
export function toolCategory(table: McpToolTable, tool: string): { category: Category; rule: string } {
  const mapped = table.tools.get(tool);
  if (mapped !== undefined) return { category: mapped, rule: 'mcp.tool.map' };
  const seen = table.annotated(tool);
  if (seen !== undefined) return { category: seen, rule: 'mcp.tool.annotation' };
  if (table.defaultCategory !== null) return { category: table.defaultCategory, rule: 'mcp.tool.default' };
  return { category: FAIL_CLOSED_CATEGORY, rule: 'mcp.tool.unknown' };
}

/** Classifies one request to a registered server's URL. Never throws for any input of the declared type. */
export function classifyMcp(req: Pick<ClassifyRequest, 'method' | 'headers' | 'body'>, table: McpToolTable): McpClassification {
  const method = req.method.toUpperCase();
  const none = { ids: [], listIds: [], batch: false } as const;
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return { category: 'read', rule: 'mcp.stream', ...none };
  if (method === 'DELETE') return { category: 'read', rule: 'mcp.session_end', ...none };
  if (method !== 'POST') return { category: FAIL_CLOSED_CATEGORY, rule: 'mcp.unparsable', ...none };
  const parsed = parseMcpBody(req.body, req.headers);
  const ids = parsed.messages.flatMap((m) => (m.id !== undefined && m.method !== '' ? [m.id] : []));
  if (!parsed.ok) return { category: FAIL_CLOSED_CATEGORY, rule: 'mcp.unparsable', ids, listIds: [], batch: parsed.messages.length > 1 };
  let worst: { category: Category; rule: string } | null = null;
  const tools = new Set<string>();
  for (const m of parsed.messages) {
    if (m.method !== 'tools/call') continue;
    tools.add(m.tool!);
    const c = toolCategory(table, m.tool!);
    if (worst === null || dangerRank(c.category) > dangerRank(worst.category)) worst = c;
  }
  const category: Category = worst?.category ?? 'read';
  const rule = worst?.rule ?? 'mcp.read';
  const listIds = parsed.messages.flatMap((m) => (m.method === 'tools/list' && m.id !== undefined ? [m.id] : []));
  const tool = tools.size === 0 ? undefined : [...tools].sort().join(',');
  return { category, rule: parsed.batch ? `mcp.batch(${rule})` : rule, ...(tool !== undefined ? { tool } : {}), ids, listIds, batch: parsed.batch };
}

/** A tool as a tools/list answer lists it, with the category its annotations give. */
export interface ListedTool {
  readonly name: string;
  readonly category: Category;
}

/** readOnlyHint: true → read; destructiveHint: true → delete (also when both are claimed); otherwise write. */
export function annotationCategory(annotations: unknown): Category {
  if (!isObject(annotations)) return 'write';
  if (annotations.destructiveHint === true) return 'delete';
  if (annotations.readOnlyHint === true) return 'read';
  return 'write';
}

function toolsOf(v: unknown, listIds: ReadonlySet<JsonRpcId>, out: ListedTool[]): void {
  for (const m of Array.isArray(v) ? v : [v]) {
    if (!isObject(m) || m.jsonrpc !== '2.0' || !validId(m.id) || !listIds.has(m.id)) continue;
    const result = m.result;
    if (!isObject(result) || !Array.isArray(result.tools)) continue;
    for (const t of result.tools) {
      if (!isObject(t) || typeof t.name !== 'string' || !TOOL_NAME.test(t.name)) continue;
      out.push({ name: t.name, category: annotationCategory(t.annotations) });
    }
  }
}

/**
 * The tools a server's answer to tools/list lists (JSON, or server-sent events whose `data:`
 * carries the JSON-RPC response), only from responses to the given request ids. Strict like
 * the request side: an answer that is not UTF-8, repeats a key or is larger than
 * MAX_TOOLS_LIST_ANSWER teaches nothing (its tools stay unknown: default or fail closed).
 */
export function parseToolsListAnswer(contentType: string | undefined, bytes: Uint8Array, listIds: readonly JsonRpcId[]): ListedTool[] {
  if (bytes.length > MAX_TOOLS_LIST_ANSWER || listIds.length === 0) return [];
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return [];
  }
  const ids = new Set(listIds);
  const out: ListedTool[] = [];
  const readJson = (s: string): void => {
    let v: unknown;
    try {
      v = JSON.parse(s);
    } catch {
      return;
    }
    if (!hasDuplicateKeys(s)) toolsOf(v, ids, out);
  };
  const ct = (contentType ?? '').toLowerCase();
  if (ct.startsWith('text/event-stream')) {
    // Events end at a blank line; an event's data is its `data:` lines joined with \n.
    for (const event of text.split(/\r\n\r\n|\n\n|\r\r/)) {
      const data: string[] = [];
      for (const line of event.split(/\r\n|\n|\r/)) {
        if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
      }
      if (data.length > 0) readJson(data.join('\n'));
    }
  } else if (ct.includes('json')) readJson(text);
  return out;
}

/** A registration's category field as stored (a category, or null). */
export function categoryOrNull(v: unknown): Category | null {
  return isCategory(v) ? v : null;
}
