/**
 * Policy simulation (issue 26, item 4; docs/policies-approvals.md "Simulation"): draft rules
 * evaluated against the requests the audit log recorded, to see what they would change
 * before they are set. Nothing is stored or changed.
 *
 * simulateRecords() is the pure part (tested in test/unit/policies/simulate.test.ts); the
 * policies service reads the records through the audit domain's service and calls it.
 *
 * Decisions (the docs say the same):
 *  - Evaluated: entries with a connector and a category, i.e. requests that carried a
 *    credential and reached the policy. Everything else (egress refusals, requests with no
 *    credential, a credential refused before classification) is skipped and not counted.
 *  - `was` is the recorded decision: what the policy in force then said (a request held
 *    for approval is `ask`, whatever the person answered).
 *  - `would_be` is the draft's decision with grants ignored (the draft is about rules: a
 *    request a grant let through shows as `ask` when the draft asks for it).
 *  - Conditions (`when`) read the facts recorded with the entry (bounded and scrubbed by the
 *    audit writer). A recipient list cut short when stored is unknown, as are facts an
 *    entry does not have (entries from before facts were recorded): the engine then takes
 *    the riskier reading. count_over is not replayed (the log does not say which requests
 *    counted where): its count is unknown, so it holds on deny and ask rules and does not
 *    on allow rules. A simulated change is therefore the most the draft could change.
 *  - An entry recorded as allowed `infrastructure_credential` is evaluated as a request
 *    with an infrastructure secret (the flag is not stored otherwise).
 */
import { compilePolicy, evaluate, isCategory, type DecisionKind, type PolicyRequest, type RequestFacts, type Rule } from '../policy-engine/index.js';

/** `limit` of a simulation: default and maximum. */
export const SIMULATE_DEFAULT_LIMIT = 1000;
export const SIMULATE_MAX_LIMIT = 10_000;
/** Examples returned at most. */
export const SIMULATE_MAX_EXAMPLES = 50;

/** The facts of an entry as the audit log stores them (audit/entry.ts StoredFacts). */
export interface RecordedFacts {
  amount?: { currency: string; minor_units: number } | null;
  recipients?: string[] | null;
  /** Present when more recipients were sent than are stored. */
  recipients_total?: number;
  channel?: string | null;
}

/** A recorded request, as the audit domain's policyRecords() answers it. */
export interface SimulatedRecord {
  id: string;
  method: string;
  host: string;
  path: string;
  connector: string | null;
  category: string | null;
  decision: DecisionKind;
  reason: string | null;
  facts: RecordedFacts | null;
  /** The MCP tool(s) the request called (issue 28); rules naming a tool match only it. */
  tool?: string | null;
}

export interface SimulationExample {
  audit_id: string;
  method: string;
  host: string;
  path: string;
  connector: string;
  category: string;
  was: DecisionKind;
  would_be: DecisionKind;
  /** The draft's rules that matched (0-based indexes into the draft). */
  matched_rules: number[];
}

export interface SimulationResult {
  evaluated: number;
  changed: number;
  /** `"<was>-><would_be>"` → how many; changed pairs only. */
  transitions: Record<string, number>;
  /** At most SIMULATE_MAX_EXAMPLES changed requests, newest first. */
  examples: SimulationExample[];
}

/**
 * The stored facts as the policy engine reads them. A list cut short when stored is
 * unknown (null), never the first recipients alone: a recipient beyond them could be the
 * one outside.
 */
export function factsForPolicy(stored: RecordedFacts | null | undefined): RequestFacts | null {
  if (!stored || typeof stored !== 'object') return null;
  const out: { amount?: RequestFacts['amount']; recipients?: RequestFacts['recipients']; channel?: RequestFacts['channel'] } = {};
  if (stored.amount !== undefined) out.amount = stored.amount;
  if (stored.recipients !== undefined) {
    out.recipients = Array.isArray(stored.recipients) && stored.recipients_total === undefined ? stored.recipients : null;
  }
  if (stored.channel !== undefined) out.channel = stored.channel;
  return out;
}

const VERDICTS: ReadonlySet<string> = new Set(['allow', 'ask', 'deny']);

/**
 * Evaluates `rules` (validated) against the records (newest first, as read) and counts
 * what would change. Records are evaluated oldest first; examples are the newest changed
 * ones, newest first. PURE.
 */
export function simulateRecords(rules: readonly Rule[], records: readonly SimulatedRecord[], nowMs: number): SimulationResult {
  const policy = compilePolicy(rules);
  const transitions: Record<string, number> = {};
  const changedAt: Array<{ r: SimulatedRecord; would_be: DecisionKind; matched: number[] }> = [];
  let evaluated = 0;
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (!r.connector || !r.category || !isCategory(r.category) || !VERDICTS.has(r.decision)) continue;
    evaluated++;
    // `facts` is read by rule conditions (policy-engine/conditions.ts); built as a variable
    // so it type-checks whether or not PolicyRequest names it yet.
    const request: PolicyRequest & { facts?: RequestFacts | null } = {
      connector: r.connector,
      category: r.category,
      infrastructure: r.reason === 'infrastructure_credential',
      facts: factsForPolicy(r.facts),
      ...(r.tool ? { tool: r.tool } : {}),
    };
    const d = evaluate(policy, request, [], { nowMs, ignoreGrants: true });
    if (d.decision === r.decision) continue;
    const key = `${r.decision}->${d.decision}`;
    transitions[key] = (transitions[key] ?? 0) + 1;
    changedAt.push({ r, would_be: d.decision, matched: d.matched_rules });
  }
  const examples: SimulationExample[] = [];
  for (let i = changedAt.length - 1; i >= 0 && examples.length < SIMULATE_MAX_EXAMPLES; i--) {
    const { r, would_be, matched } = changedAt[i]!;
    examples.push({
      audit_id: r.id, method: r.method, host: r.host, path: r.path, connector: r.connector!, category: r.category!,
      was: r.decision, would_be, matched_rules: matched,
    });
  }
  return { evaluated, changed: changedAt.length, transitions, examples };
}
