/**
 * evaluate(): the policy decision for one request (service.md "Policy decision rules",
 * "Grant"; decisions.md "Policies" evaluation order). PURE: no I/O, no clock of its own
 * (the caller passes `nowMs`), no imports outside policy-engine/.
 *
 * Evaluation order, exactly as decisions.md writes it:
 *   0. infrastructure secret              → allow `infrastructure_credential`
 *   1. a matching deny rule               → deny  `deny_rule`
 *   2. a matching ask rule                → covering grant ? allow `grant`
 *                                                          : ask `ask_rule`, narrowest max_scope
 *   3. a matching allow rule, not high-risk → allow `rule`
 *   4. high-risk category                 → covering grant ? allow `grant`
 *                                                          : ask `high_risk`, max_scope permanent
 *   5. otherwise                          → deny  `no_rule`
 *
 * Grants are looked at only where the policy would ask (steps 2 and 4): "Before asking,
 * an existing covering grant is looked for." A grant is the stored answer to a question
 * the policy asked; it is not a standing allow. Consequences, on purpose:
 *  - A deny rule beats every grant (step 1 runs first), so adding a deny rule revokes in
 *    effect every grant it matches.
 *  - A read or write with no matching rule is denied `no_rule` EVEN WITH a covering grant.
 *    Such a grant can only exist if an ask rule once matched and was since removed; the
 *    developer removing the ask rule without adding an allow is read as "no longer
 *    permitted", and the fail-closed answer is deny. (Re-adding the ask rule brings the
 *    grant back into use, since grants are not deleted by a policy change.)
 *  - A read or write allowed by a rule is allowed `rule` and reports no grant, even if one
 *    would cover it: `grant` in the result is the grant the decision *used*.
 *
 * Two forms of the same algorithm, which always agree (property-tested):
 *  - over plain arrays (`evaluateNaive`, or `evaluate` given arrays): O(rules + grants);
 *  - over `compilePolicy(rules)` and `new GrantIndex(grants)`: a table lookup by
 *    connector and category plus a walk over the grants of that connector+category only.
 */
import { CATEGORIES, isHighRisk, narrowest, scopeWidth } from './categories.js';
import type { Category, GrantScope, Scope } from './categories.js';
import type { Rule } from './rules.js';
import { conditionsHold, conditionsNeedFacts } from './conditions.js';
import type { RequestFacts } from './facts.js';
import { withinLimits, type GrantLimits, type GrantUse } from './grant-limits.js';

export interface PolicyRequest {
  readonly connector: string;
  readonly category: Category;
  readonly task_id?: string | null;
  readonly session_id?: string | null;
  /**
   * The credential is a secret flagged `infrastructure`. Honoured only when `connector`
   * starts with `secret:` (only secrets carry the flag); on a connection connector it is
   * ignored, so a caller bug cannot switch the policy off for mail or chat.
   */
  readonly infrastructure?: boolean;
  /**
   * What the request would do, decoded (policy-engine/facts.ts factsOf): read by rule
   * conditions and grant limits. Absent or null fields could not be read: the riskier
   * reading is taken (conditions.ts).
   */
  readonly facts?: RequestFacts | null;
  /**
   * For each rule with a `count_over` condition (by rule index): how many requests it
   * counts were already forwarded in its window. A rule missing here counts as unknown
   * (its condition holds for deny/ask, not for allow). Filled by the caller (the decider
   * reads the store); evaluate() reads no store.
   */
  readonly counts?: ReadonlyMap<number, number>;
  /**
   * The MCP tool(s) the request calls (issue 28; policy-engine/classify/mcp.ts): a rule with
   * `tool` matches only when it equals this, and a grant covers only its own tool.
   */
  readonly tool?: string | null;
}

/** The fields of a grant record evaluate() reads. Records may carry more; they are returned as given. */
export interface GrantLike {
  readonly id: string;
  readonly connector: string;
  readonly category: Category;
  readonly scope: GrantScope;
  readonly task_id: string | null;
  readonly session_id: string | null;
  /** Unix milliseconds, or null. */
  readonly expires_at: number | null;
  /** Spending mandate (grant-limits.ts): set, the grant covers only requests within it. */
  readonly limits?: GrantLimits | null;
  /** What was used of `limits` so far. */
  readonly used?: GrantUse | null;
  /** The MCP tool(s) of the approved request (issue 28): the grant covers only requests with the same; null: none. */
  readonly tool?: string | null;
}

export type Reason = 'rule' | 'grant' | 'deny_rule' | 'ask_rule' | 'high_risk' | 'no_rule' | 'infrastructure_credential';
export type DecisionKind = 'allow' | 'ask' | 'deny';

export interface Decision<G extends GrantLike = GrantLike> {
  decision: DecisionKind;
  reason: Reason;
  /** 0-based indexes of every rule whose connector, category and conditions match, in rule order. */
  matched_rules: number[];
  /** Present only when decision is `ask`. */
  max_scope?: Scope;
  /** The grant the decision used (reason `grant`), else null. */
  grant: G | null;
}

export interface EvaluateOptions {
  /** The current time, Unix milliseconds (time-limited grants expire against it). */
  readonly nowMs: number;
  /**
   * Decide as if no grant existed; `grant` is then always null. Not what the policy-check
   * endpoint uses by default (see docs/classification.md, "Policy check"): it is for
   * asking "what does the policy alone say", e.g. to show a developer which requests
   * would ask once the end user's grants are revoked.
   */
  readonly ignoreGrants?: boolean;
}

/** What the rules say about one connector+category, before grants are looked at. */
interface RuleSummary {
  readonly matched: readonly number[];
  readonly deny: boolean;
  /** Narrowest max_scope among matching ask rules; null when no ask rule matches. */
  readonly askScope: Scope | null;
  readonly allow: boolean;
  /**
   * Rules with `when` whose connector and category match: left out of the four fields
   * above, and checked per request (resolve()). Empty for a policy without conditions,
   * which therefore costs nothing more than before.
   */
  readonly conditional: readonly number[];
  /** The conditional rules with `count_over` (their counts must be supplied). */
  readonly counted: readonly number[];
  /** Some conditional rule reads the request's decoded fields. */
  readonly needsFacts: boolean;
}

/**
 * Summarizes the rules matching (connector, category). `connector === null` stands for a
 * connector that no rule names: only rules without a connector match it.
 */
function summarize(rules: readonly Rule[], connector: string | null, category: string): RuleSummary {
  const matched: number[] = [];
  const conditional: number[] = [];
  const counted: number[] = [];
  let needsFacts = false;
  let deny = false;
  let allow = false;
  let askScope: Scope | null = null;
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i]!;
    if (r.connector !== undefined && r.connector !== connector) continue;
    if (r.category !== undefined && r.category !== category) continue;
    // A rule naming a tool (issue 28) is checked per request, like one with conditions.
    if (r.when !== undefined || r.tool !== undefined) {
      conditional.push(i);
      if (r.when?.count_over !== undefined) counted.push(i);
      if (r.when !== undefined && conditionsNeedFacts(r.when)) needsFacts = true;
      continue;
    }
    matched.push(i);
    if (r.effect === 'deny') deny = true;
    else if (r.effect === 'allow') allow = true;
    else if (r.effect === 'ask') {
      const s = r.max_scope ?? 'permanent';
      askScope = askScope === null ? s : narrowest(askScope, s);
    }
  }
  return { matched, deny, askScope, allow, conditional, counted, needsFacts };
}

/** Whether rule i (with `when` or `tool`) holds for this request. */
function holds(rules: readonly Rule[], i: number, request: PolicyRequest): boolean {
  const r = rules[i]!;
  if (r.tool !== undefined && r.tool !== request.tool) return false;
  if (r.when === undefined) return true;
  return conditionsHold(r.when, r.effect, { facts: request.facts, count: request.counts?.get(i) });
}

/**
 * The summary for one request: the unconditional part as it is, plus every conditional
 * rule whose conditions hold. `matched` stays in rule order.
 */
function resolve(rules: readonly Rule[], s: RuleSummary, request: PolicyRequest): { summary: RuleSummary; matched: number[] } {
  if (s.conditional.length === 0) return { summary: s, matched: s.matched.slice() };
  let { deny, allow, askScope } = s;
  const extra: number[] = [];
  for (const i of s.conditional) {
    if (!holds(rules, i, request)) continue;
    extra.push(i);
    const r = rules[i]!;
    if (r.effect === 'deny') deny = true;
    else if (r.effect === 'allow') allow = true;
    else if (r.effect === 'ask') {
      const sc = r.max_scope ?? 'permanent';
      askScope = askScope === null ? sc : narrowest(askScope, sc);
    }
  }
  const matched: number[] = [];
  let a = 0;
  let b = 0;
  while (a < s.matched.length || b < extra.length) {
    if (b >= extra.length || (a < s.matched.length && s.matched[a]! < extra[b]!)) matched.push(s.matched[a++]!);
    else matched.push(extra[b++]!);
  }
  return { summary: { ...s, deny, allow, askScope }, matched };
}

function nonEmpty(s: string | null | undefined): s is string {
  return typeof s === 'string' && s.length > 0;
}

/** A grant with limits covers only a request within them (grant-limits.ts). */
function limitsAllow(g: GrantLike, request: PolicyRequest): boolean {
  return g.limits === undefined || g.limits === null || withinLimits(g.limits, g.used, request.facts);
}

function notExpired(g: GrantLike, nowMs: number): boolean {
  // Any grant carrying an expiry stops covering at that instant; a time_limited grant
  // without one never covers (fail closed on a malformed record).
  return g.expires_at === null || g.expires_at === undefined || g.expires_at > nowMs;
}

/**
 * Whether a grant covers a request: same connector and category; a task grant needs the
 * request's task_id equal (and present), a session grant its session_id; a time_limited
 * grant needs expires_at > now; a permanent grant always covers. Environment scoping is
 * the caller's: pass only the environment's grants.
 */
export function grantCovers(g: GrantLike, request: PolicyRequest, nowMs: number): boolean {
  if (g.connector !== request.connector || g.category !== request.category) return false;
  if ((g.tool ?? null) !== (request.tool ?? null)) return false;
  if (!notExpired(g, nowMs)) return false;
  if (!limitsAllow(g, request)) return false;
  switch (g.scope) {
    case 'task':
      return nonEmpty(request.task_id) && g.task_id === request.task_id;
    case 'session':
      return nonEmpty(request.session_id) && g.session_id === request.session_id;
    case 'time_limited':
      return typeof g.expires_at === 'number';
    case 'permanent':
      return true;
    default:
      return false;
  }
}

/**
 * The covering grant a request uses when several cover it: the narrowest scope (task,
 * then session, then time_limited, then permanent), and among those the first in the
 * order given. Deterministic, so the audit log names the same grant every time.
 */
function findGrantNaive<G extends GrantLike>(grants: readonly G[], request: PolicyRequest, nowMs: number): G | null {
  let best: G | null = null;
  let bestWidth = Infinity;
  for (const g of grants) {
    if (!grantCovers(g, request, nowMs)) continue;
    const w = scopeWidth(g.scope);
    if (w < bestWidth) {
      best = g;
      bestWidth = w;
      if (w === 1) break; // task: nothing narrower exists for a grant
    }
  }
  return best;
}

interface Bucket<G> {
  readonly task: Map<string, G[]>;
  readonly session: Map<string, G[]>;
  readonly timeLimited: G[];
  readonly permanent: G[];
}

function bucketKey(connector: string, category: string, tool: string | null | undefined): string {
  // A grant covers only its own tool (issue 28): requests without one use the key as before.
  return tool == null ? `${connector}\u0000${category}` : `${connector}\u0000${category}\u0000${tool}`;
}

function pushTo<G>(map: Map<string, G[]>, key: string, g: G): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [g]);
  else list.push(g);
}

/**
 * An environment's grants bucketed by connector+category, task and session grants keyed
 * by their id. Finding the covering grant costs a map lookup plus a walk over the
 * time-limited and permanent grants of that one connector+category. Immutable: rebuild
 * it when grants change (building is O(grants)).
 */
export class GrantIndex<G extends GrantLike = GrantLike> {
  readonly size: number;
  private readonly buckets = new Map<string, Bucket<G>>();

  constructor(grants: Iterable<G>) {
    let n = 0;
    for (const g of grants) {
      n++;
      const key = bucketKey(g.connector, g.category, g.tool);
      let b = this.buckets.get(key);
      if (b === undefined) {
        b = { task: new Map(), session: new Map(), timeLimited: [], permanent: [] };
        this.buckets.set(key, b);
      }
      // Grants that can never cover anything (a task grant without a task id, an unknown
      // scope) are dropped here, exactly as grantCovers() would reject them.
      switch (g.scope) {
        case 'task':
          if (nonEmpty(g.task_id)) pushTo(b.task, g.task_id, g);
          break;
        case 'session':
          if (nonEmpty(g.session_id)) pushTo(b.session, g.session_id, g);
          break;
        case 'time_limited':
          b.timeLimited.push(g);
          break;
        case 'permanent':
          b.permanent.push(g);
          break;
      }
    }
    this.size = n;
  }

  /** The grant that covers the request (same choice as the array form), or null. */
  find(request: PolicyRequest, nowMs: number): G | null {
    const b = this.buckets.get(bucketKey(request.connector, request.category, request.tool));
    if (b === undefined) return null;
    if (nonEmpty(request.task_id)) {
      const list = b.task.get(request.task_id);
      if (list !== undefined) for (const g of list) if (notExpired(g, nowMs) && limitsAllow(g, request)) return g;
    }
    if (nonEmpty(request.session_id)) {
      const list = b.session.get(request.session_id);
      if (list !== undefined) for (const g of list) if (notExpired(g, nowMs) && limitsAllow(g, request)) return g;
    }
    for (const g of b.timeLimited) if (typeof g.expires_at === 'number' && g.expires_at > nowMs && limitsAllow(g, request)) return g;
    for (const g of b.permanent) if (notExpired(g, nowMs) && limitsAllow(g, request)) return g;
    return null;
  }
}

/**
 * A policy with its rules pre-summarized for every (connector, category) pair that can
 * give a distinct answer: each connector some rule names, plus "any other connector",
 * times the six categories. Memory is O((named connectors + 1) × 6 × rules) and bounded
 * by the policy itself, not by the requests seen (a check endpoint fed arbitrary
 * connector strings cannot grow it).
 */
export class CompiledPolicy {
  readonly rules: readonly Rule[];
  private readonly byConnector = new Map<string, readonly RuleSummary[]>();
  private readonly other: readonly RuleSummary[];

  constructor(rules: readonly Rule[]) {
    this.rules = Object.freeze(rules.map((r) => Object.freeze({ ...r })));
    const table = (connector: string | null): readonly RuleSummary[] =>
      Object.freeze(
        CATEGORIES.map((c) => {
          const s = summarize(this.rules, connector, c);
          return Object.freeze({ ...s, matched: Object.freeze(s.matched), conditional: Object.freeze(s.conditional), counted: Object.freeze(s.counted) });
        }),
      );
    for (const r of this.rules) {
      if (r.connector !== undefined && !this.byConnector.has(r.connector)) {
        this.byConnector.set(r.connector, table(r.connector));
      }
    }
    this.other = table(null);
    for (const r of this.rules) {
      if (r.when === undefined) continue;
      this.hasConditions = true;
      if (conditionsNeedFacts(r.when)) this.needsFacts = true;
      if (r.when.count_over !== undefined) this.hasCounts = true;
      if (r.when.count_over?.scope === 'end_user') this.countsEndUser = true;
    }
  }

  /** Some rule has `when`. */
  readonly hasConditions: boolean = false;
  /** Some rule's conditions read the request's decoded fields (amount, recipients, channel). */
  readonly needsFacts: boolean = false;
  /** Some rule has `count_over`. */
  readonly hasCounts: boolean = false;
  /** Some rule counts across the end user's environments. */
  readonly countsEndUser: boolean = false;

  /** Indexes of the count_over rules that match this connector and category (their counts are wanted). */
  countedRules(connector: string, category: string): readonly number[] {
    return this.hasCounts ? this.lookup(connector, category).counted : EMPTY;
  }

  /** @internal the rules' verdict for one connector+category (matched is shared: copy it). */
  lookup(connector: string, category: string): RuleSummary {
    const idx = CATEGORY_INDEX.get(category);
    // A category outside the six (only reachable by a caller bypassing the types) is
    // summarized on the fly rather than cached, to keep the table bounded.
    if (idx === undefined) return summarize(this.rules, connector, category);
    const t = this.byConnector.get(connector) ?? this.other;
    return t[idx]!;
  }
}

const CATEGORY_INDEX: ReadonlyMap<string, number> = new Map(CATEGORIES.map((c, i) => [c, i]));
const EMPTY: readonly number[] = Object.freeze([]);

/** Precomputes the rule table of a (validated) policy. */
export function compilePolicy(rules: readonly Rule[]): CompiledPolicy {
  return new CompiledPolicy(rules);
}

/** Buckets grants for fast lookup. Same as `new GrantIndex(grants)`. */
export function indexGrants<G extends GrantLike>(grants: Iterable<G>): GrantIndex<G> {
  return new GrantIndex(grants);
}

function decide<G extends GrantLike>(
  summary: RuleSummary,
  matched: number[],
  request: PolicyRequest,
  findGrant: () => G | null,
): Decision<G> {
  if (request.infrastructure === true && request.connector.startsWith('secret:')) {
    return { decision: 'allow', reason: 'infrastructure_credential', matched_rules: matched, grant: null };
  }
  if (summary.deny) return { decision: 'deny', reason: 'deny_rule', matched_rules: matched, grant: null };
  if (summary.askScope !== null) {
    const g = findGrant();
    if (g !== null) return { decision: 'allow', reason: 'grant', matched_rules: matched, grant: g };
    return { decision: 'ask', reason: 'ask_rule', matched_rules: matched, max_scope: summary.askScope, grant: null };
  }
  const highRisk = isHighRisk(request.category);
  if (summary.allow && !highRisk) return { decision: 'allow', reason: 'rule', matched_rules: matched, grant: null };
  if (highRisk) {
    const g = findGrant();
    if (g !== null) return { decision: 'allow', reason: 'grant', matched_rules: matched, grant: g };
    return { decision: 'ask', reason: 'high_risk', matched_rules: matched, max_scope: 'permanent', grant: null };
  }
  return { decision: 'deny', reason: 'no_rule', matched_rules: matched, grant: null };
}

/**
 * The policy decision for one request. Accepts plain arrays or the compiled forms, in
 * any mix; the answer is the same. For the hot path (the proxy), compile the policy once
 * per policy version and index the environment's grants once per grant change.
 */
export function evaluate<G extends GrantLike>(
  policy: readonly Rule[] | CompiledPolicy,
  request: PolicyRequest,
  grants: readonly G[] | GrantIndex<G>,
  opts: EvaluateOptions,
): Decision<G> {
  const compiled = policy instanceof CompiledPolicy;
  let summary = compiled ? policy.lookup(request.connector, request.category) : summarize(policy, request.connector, request.category);
  let matched: number[];
  if (summary.conditional.length === 0) {
    // The hot path of a policy without conditions (or none for this connector+category): as before.
    matched = compiled ? summary.matched.slice() : (summary.matched as number[]);
  } else {
    const r = resolve(compiled ? policy.rules : policy, summary, request);
    summary = r.summary;
    matched = r.matched;
  }
  const nowMs = opts.nowMs;
  const findGrant: () => G | null = opts.ignoreGrants
    ? () => null
    : grants instanceof GrantIndex
      ? () => grants.find(request, nowMs)
      : () => findGrantNaive(grants, request, nowMs);
  return decide(summary, matched, request, findGrant);
}

/** The reference form over plain arrays, straight from the spec. Same answers as evaluate(). */
export function evaluateNaive<G extends GrantLike>(
  rules: readonly Rule[],
  request: PolicyRequest,
  grants: readonly G[],
  opts: EvaluateOptions,
): Decision<G> {
  // Straight from the spec: every rule whose connector, category and conditions match.
  const matched: number[] = [];
  let deny = false;
  let allow = false;
  let askScope: Scope | null = null;
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i]!;
    if (r.connector !== undefined && r.connector !== request.connector) continue;
    if (r.category !== undefined && r.category !== request.category) continue;
    if (r.tool !== undefined && r.tool !== request.tool) continue;
    if (r.when !== undefined && !holds(rules, i, request)) continue;
    matched.push(i);
    if (r.effect === 'deny') deny = true;
    else if (r.effect === 'allow') allow = true;
    else if (r.effect === 'ask') askScope = askScope === null ? r.max_scope ?? 'permanent' : narrowest(askScope, r.max_scope ?? 'permanent');
  }
  const summary: RuleSummary = { matched, deny, allow, askScope, conditional: [], counted: [], needsFacts: false };
  const nowMs = opts.nowMs;
  return decide(summary, matched, request, () =>
    opts.ignoreGrants ? null : findGrantNaive(grants, request, nowMs),
  );
}
