import { hash } from 'node:crypto';
import type { AuditRow, UnchainedRow } from './entry.js';

/**
 * The hash chain of a developer's audit log (docs/audit.md). Pure: no store, no clock.
 *
 *   hash(n) = sha256_hex(prev_hash(n) + canonical_json(entry n))
 *   prev_hash(1) = GENESIS_HASH, prev_hash(n) = hash(n-1), seq(n) = n
 *
 * canonical_json is JSON.stringify of an object with exactly HASHED_FIELDS in that order:
 * numbers as JSON integers, absent values as null, every other value as the stored string
 * (matched_rules is hashed as its stored JSON text). seq and developer_id are hashed, so a
 * row moved to another position or another developer no longer matches its hash.
 */
export const GENESIS_HASH = '0'.repeat(64);

export const HASHED_FIELDS = [
  'id', 'developer_id', 'seq', 'created_at', 'environment_id', 'method', 'host', 'path',
  'connector', 'category', 'credential', 'decision', 'reason', 'matched_rules',
  'approval_id', 'grant_id', 'status', 'upstream_status', 'bytes_in', 'bytes_out', 'duration_ms',
] as const satisfies ReadonlyArray<keyof AuditRow>;

const NUMERIC = new Set<string>(['seq', 'created_at', 'status', 'upstream_status', 'bytes_in', 'bytes_out', 'duration_ms']);

/**
 * `redacted` (issue 9) is hashed after HASHED_FIELDS and only when true, as
 * `,"redacted":true`: entries written before it existed (all false) keep their hashes, and
 * flipping it either way on a stored row breaks that row's hash. `facts` (issue 26) is
 * hashed after it, only when not null, as `,"facts":"<its stored JSON text>"`.
 */
export type HashedRow = Pick<AuditRow, (typeof HASHED_FIELDS)[number]> & { redacted?: boolean | number | null; facts?: string | null; tool?: string | null };

/** `"name":` of each hashed field, the first without the comma; whether it is numeric. */
const PARTS = HASHED_FIELDS.map((f, i) => [`${i === 0 ? '' : ','}${JSON.stringify(f)}:`, NUMERIC.has(f)] as const);

/**
 * Exactly `JSON.stringify` of an object with HASHED_FIELDS in order (the definition above;
 * test/unit/audit/chain.test.ts checks the two agree), built as one string: the object and
 * its stringification cost ~10 µs per row, a quarter of the audit writer's CPU.
 */
export function canonicalJson(row: HashedRow): string {
  let out = '{';
  for (let i = 0; i < PARTS.length; i++) {
    const [name, numeric] = PARTS[i]!;
    const v = row[HASHED_FIELDS[i]!];
    // Drivers hand BIGINT back as number (mysql2 with bigNumberStrings off) or string;
    // both hash alike.
    out += name + (v == null ? 'null' : numeric ? JSON.stringify(Number(v)) : JSON.stringify(String(v)));
  }
  if (row.redacted === true || Number(row.redacted) === 1) out += ',"redacted":true';
  // `facts` (issue 26) likewise: after everything else and only when stored (its JSON text
  // as a JSON string), so entries without facts, those before the column included, keep
  // their hashes; adding, changing or removing a row's facts breaks its hash.
  if (row.facts != null) out += `,"facts":${JSON.stringify(String(row.facts))}`;
  // `tool` (issue 28) likewise, after facts and only when stored.
  if (row.tool != null) out += `,"tool":${JSON.stringify(String(row.tool))}`;
  return `${out}}`;
}

export function entryHash(prevHash: string, row: HashedRow): string {
  return hash('sha256', prevHash + canonicalJson(row), 'hex');
}

/** `audit_chain_heads`: the last seq and hash of a developer's chain. */
export interface ChainHead {
  seq: number;
  hash: string;
}

export const EMPTY_HEAD: ChainHead = Object.freeze({ seq: 0, hash: GENESIS_HASH });

/** Appends rows (one developer's, in order) to the chain ending at `head`. */
export function chainRows(head: ChainHead, rows: readonly UnchainedRow[]): { rows: AuditRow[]; head: ChainHead } {
  let seq = Number(head.seq);
  let prev = head.hash;
  const out: AuditRow[] = [];
  for (const r of rows) {
    seq += 1;
    // A literal, not `{ ...r, seq, ... }`: V8 spreads a 20-field object at ~8 µs a row.
    const row: AuditRow = {
      id: r.id, developer_id: r.developer_id, seq, created_at: r.created_at, environment_id: r.environment_id, method: r.method,
      host: r.host, path: r.path, connector: r.connector, category: r.category, credential: r.credential, decision: r.decision,
      reason: r.reason, matched_rules: r.matched_rules, approval_id: r.approval_id, grant_id: r.grant_id, status: r.status,
      upstream_status: r.upstream_status, bytes_in: r.bytes_in, bytes_out: r.bytes_out, duration_ms: r.duration_ms,
      redacted: r.redacted, facts: r.facts, tool: r.tool ?? null, prev_hash: prev, hash: '',
    };
    row.hash = entryHash(prev, row);
    prev = row.hash;
    out.push(row);
  }
  return { rows: out, head: { seq, hash: prev } };
}

export interface VerifyResult {
  ok: boolean;
  /** Entries examined: all of them when ok, else up to and including the broken one. */
  checked: number;
  first_broken_id: string | null;
  /**
   * The id of the first entry examined: the oldest entry kept (after retention pruned the
   * ones before it, docs/audit.md "Retention"), or null when no entry was examined.
   */
  checked_from: string | null;
}

export type BreakReason =
  | 'seq_gap' // a row missing before this one, or rows reordered
  | 'prev_hash_mismatch' // this row does not follow the previous one
  | 'hash_mismatch' // this row's fields were changed
  | 'tail_missing' // the chain head says there were more rows after the last one
  | 'head_mismatch' // the last row's hash is not the head's hash
  | 'beyond_head'; // rows after the chain head (written around the writer)

/**
 * Walks one developer's rows in seq order, a page at a time, so a long log is never
 * loaded at once. `feed` returns false once the chain is broken (stop reading).
 *
 * `anchor` is where the kept chain starts: the seq and hash of the last entry retention
 * pruned (audit_chain_heads.pruned_seq / pruned_hash), or EMPTY_HEAD (seq 0, the genesis
 * hash) when nothing was pruned. The first row must then be seq anchor.seq + 1 with
 * prev_hash anchor.hash: only a prefix recorded as pruned may be missing.
 */
export class ChainVerifier {
  #expectedSeq: number;
  #prev: string;
  #checked = 0;
  #firstId: string | null = null;
  #lastId: string | null = null;
  #broken: string | null = null;
  #reason: BreakReason | null = null;
  #isBroken = false;

  constructor(anchor: ChainHead = EMPTY_HEAD) {
    this.#expectedSeq = Number(anchor.seq) + 1;
    this.#prev = anchor.hash;
  }

  get broken(): boolean {
    return this.#isBroken;
  }
  get reason(): BreakReason | null {
    return this.#reason;
  }
  /** Seq of the last row accepted (the anchor's before any). */
  get lastSeq(): number {
    return this.#expectedSeq - 1;
  }

  #break(id: string | null, reason: BreakReason): false {
    this.#isBroken = true;
    this.#broken = id;
    this.#reason = reason;
    return false;
  }

  feed(rows: Iterable<AuditRow>): boolean {
    if (this.#isBroken) return false;
    for (const row of rows) {
      this.#checked += 1;
      this.#firstId ??= row.id;
      if (Number(row.seq) !== this.#expectedSeq) return this.#break(row.id, 'seq_gap');
      if (row.prev_hash !== this.#prev) return this.#break(row.id, 'prev_hash_mismatch');
      if (entryHash(row.prev_hash, row) !== row.hash) return this.#break(row.id, 'hash_mismatch');
      this.#prev = row.hash;
      this.#lastId = row.id;
      this.#expectedSeq += 1;
    }
    return true;
  }

  /**
   * Compares the walked chain with the head. Rows removed from the end leave a chain that
   * is internally consistent; only the head, updated in the same transaction as every
   * append, shows them missing. Then first_broken_id is the last row that remains (the
   * chain breaks right after it), or null when none remains.
   */
  finish(head: ChainHead | null): VerifyResult {
    if (!this.#isBroken && head) {
      if (this.lastSeq < Number(head.seq)) this.#break(this.#lastId, 'tail_missing');
      else if (this.#prev !== head.hash) this.#break(this.#lastId, 'head_mismatch');
    }
    return this.result();
  }

  /** Id and hash of the last row accepted (null before any): how far the chain is known good. */
  get lastGood(): { id: string; seq: number; hash: string } | null {
    return this.#lastId === null ? null : { id: this.#lastId, seq: this.lastSeq, hash: this.#prev };
  }

  /** Marks a row found after the chain head as the break (see audit.service verify). */
  beyondHead(id: string): VerifyResult {
    if (!this.#isBroken) this.#break(id, 'beyond_head');
    return this.result();
  }

  result(): VerifyResult {
    return { ok: !this.#isBroken, checked: this.#checked, first_broken_id: this.#isBroken ? this.#broken : null, checked_from: this.#firstId };
  }
}

/** The whole chain at once (tests, small logs); `anchor` as for ChainVerifier. */
export function verifyRows(rows: Iterable<AuditRow>, head: ChainHead | null, anchor: ChainHead = EMPTY_HEAD): VerifyResult & { reason: BreakReason | null } {
  const v = new ChainVerifier(anchor);
  v.feed(rows);
  const out = v.finish(head);
  return { ...out, reason: v.reason };
}
