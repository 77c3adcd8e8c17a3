import type { Db } from '../store/db.js';
import { fromJson, toJson } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { ServiceError } from '../lib/errors.js';
import type { Category, GrantLike, Money, RequestFacts, Rule, Scope } from '../policy-engine/index.js';
import type { EnvironmentsService } from '../environments/environments.service.js';
import type { EngineGrant } from '../approvals/approvals.service.js';
import { createPolicyDecider, type EffectivePolicy, type PolicySource } from './decider.js';
import { DEVELOPER_SCOPE, policiesStore, type PolicyRow } from './policies.store.js';
import { createRateCounter } from './rate-counts.js';
import { SIMULATE_DEFAULT_LIMIT, simulateRecords, type SimulatedRecord, type SimulationResult } from './simulate.js';

/** The built-in behaviour when neither the environment nor the developer set a policy. */
export const DEFAULT_POLICY: Readonly<EffectivePolicy> = Object.freeze({ rules: [], source: 'default' as PolicySource });

export interface PolicyCheckInput {
  connector: string;
  category: Category;
  task_id?: string | null;
  session_id?: string | null;
  /** Decoded fields to test conditions with (issue 26); omitted: could not be read. */
  amount?: Money | null;
  recipients?: string[] | null;
  channel?: string | null;
  /** An MCP tool the request would call (issue 28). */
  tool?: string;
}

export interface PolicyCheckResult<GR> {
  decision: 'allow' | 'ask' | 'deny';
  reason: string;
  matched_rules: number[];
  /** Only when decision is `ask`. */
  max_scope?: Scope;
  grant: GR | null;
  source: PolicySource;
}

export interface PoliciesDeps<G extends GrantLike & { record: unknown }> {
  db: Db;
  clock: Clock;
  environments: Pick<EnvironmentsService, 'get'>;
  /** The environment's grants in effect (the approvals domain owns them). */
  loadGrants: (developerId: string, environmentId: string) => Promise<G[]>;
  /**
   * Whether the secret NAME the environment would use is flagged `infrastructure`: the
   * environment's own secret of that name, else the developer-level one; false when
   * neither exists. (The environments domain owns secrets.)
   */
  isInfrastructureSecret: (developerId: string, environmentId: string, name: string) => Promise<boolean>;
  /** Cross-process staleness bound of the decider cache (see policies/decider.ts). */
  refreshMs?: number;
  /**
   * The developer's recorded requests for a simulation, newest first (the audit domain's
   * policyRecords; issue 26). Without it, simulate() fails.
   */
  policyRecords?: (developerId: string, q: { environment_id?: string; sinceMs?: number | null; limit: number }) => Promise<{ records: SimulatedRecord[] }>;
}

export interface PolicySimulateInput {
  /** Validated (policy-engine validateRules). */
  rules: Rule[];
  environment_id?: string | null;
  /** Only entries created at or after this, ms. */
  sinceMs?: number | null;
  /** 1..SIMULATE_MAX_LIMIT; default SIMULATE_DEFAULT_LIMIT. */
  limit?: number;
}

const rulesOf = (row: PolicyRow): Rule[] => fromJson<Rule[]>(row.rules) ?? [];

/**
 * Policies (decisions.md "Policies"): the developer default and per-environment policies,
 * each replaced as a whole; the effective policy is the environment's, else the
 * developer's, else the built-in default (`rules: []`). Rules arrive validated
 * (policy-engine validateRules at the edge).
 *
 * Owns the PolicyDecider cache and invalidates it after every policy write; the approvals
 * domain invalidates it after grant writes (bin wires `decider.invalidate`).
 */
export function createPoliciesService<G extends GrantLike & { record: unknown }>(deps: PoliciesDeps<G>) {
  const { db, clock, environments } = deps;

  async function effective(developerId: string, environmentId: string): Promise<EffectivePolicy> {
    const rows = await policiesStore.effectiveRows(db, developerId, environmentId);
    const env = rows.find((r) => r.scope === environmentId);
    if (env) return { rules: rulesOf(env), source: 'environment' };
    const dev = rows.find((r) => r.scope === DEVELOPER_SCOPE);
    if (dev) return { rules: rulesOf(dev), source: 'developer' };
    return { rules: [], source: 'default' };
  }

  const decider = createPolicyDecider<G>({
    clock,
    loadPolicy: effective,
    loadGrants: deps.loadGrants,
    counter: createRateCounter({ db, clock }),
    // An environment's end user never changes; a destroyed or missing one counts as unknown.
    loadEndUser: async (developerId, environmentId) =>
      (await environments.get(developerId, environmentId).catch(() => null))?.end_user_id ?? null,
    ...(deps.refreshMs !== undefined ? { refreshMs: deps.refreshMs } : {}),
  });

  /** 404 for a missing or foreign environment; 409 environment_destroyed for writes on a destroyed one. */
  async function environmentFor(developerId: string, environmentId: string, write: boolean): Promise<void> {
    const env = await environments.get(developerId, environmentId);
    if (write && env.desired_state === 'destroyed') {
      throw new ServiceError('environment_destroyed', 'the environment is destroyed; its policy can no longer change');
    }
  }

  return {
    decider,
    effective,

    async getDeveloperPolicy(developerId: string): Promise<EffectivePolicy> {
      const row = await policiesStore.get(db, developerId, DEVELOPER_SCOPE);
      return row ? { rules: rulesOf(row), source: 'developer' } : { rules: [], source: 'default' };
    },

    async putDeveloperPolicy(developerId: string, rules: Rule[]): Promise<EffectivePolicy> {
      await policiesStore.put(db, developerId, DEVELOPER_SCOPE, toJson(rules), clock.nowMs());
      decider.invalidateDeveloper(developerId);
      return { rules, source: 'developer' };
    },

    async deleteDeveloperPolicy(developerId: string): Promise<EffectivePolicy> {
      await policiesStore.delete(db, developerId, DEVELOPER_SCOPE);
      decider.invalidateDeveloper(developerId);
      return { rules: [], source: 'default' };
    },

    async getEnvironmentPolicy(developerId: string, environmentId: string): Promise<EffectivePolicy> {
      await environmentFor(developerId, environmentId, false);
      return effective(developerId, environmentId);
    },

    async putEnvironmentPolicy(developerId: string, environmentId: string, rules: Rule[]): Promise<EffectivePolicy> {
      await environmentFor(developerId, environmentId, true);
      await policiesStore.put(db, developerId, environmentId, toJson(rules), clock.nowMs());
      decider.invalidate(developerId, environmentId);
      return { rules, source: 'environment' };
    },

    /** Back to the developer default; answers the effective policy after the delete. */
    async deleteEnvironmentPolicy(developerId: string, environmentId: string): Promise<EffectivePolicy> {
      await environmentFor(developerId, environmentId, true);
      await policiesStore.delete(db, developerId, environmentId);
      decider.invalidate(developerId, environmentId);
      return effective(developerId, environmentId);
    },

    /**
     * Draft rules against the recorded requests (policies/simulate.ts; docs/policies-approvals.md
     * "Simulation"): the newest `limit` entries that reached the policy, of one environment
     * (404 for a missing or foreign one) or all of the developer's, since `sinceMs`. Reads
     * only: nothing is stored, no cache is touched.
     */
    async simulate(developerId: string, input: PolicySimulateInput): Promise<SimulationResult> {
      if (!deps.policyRecords) throw new Error('policy simulation is not wired (policyRecords)');
      const environmentId = input.environment_id ?? undefined;
      if (environmentId !== undefined) await environmentFor(developerId, environmentId, false);
      const { records } = await deps.policyRecords(developerId, {
        ...(environmentId !== undefined ? { environment_id: environmentId } : {}),
        sinceMs: input.sinceMs ?? null,
        limit: input.limit ?? SIMULATE_DEFAULT_LIMIT,
      });
      return simulateRecords(input.rules, records, clock.nowMs());
    },

    /**
     * What the gateway would decide for this connector and category, grants included
     * (docs/classification.md "Policy check"). Creates no approval, changes no grant and
     * counts nothing. Conditions read `amount`, `recipients` and `channel` as given (one
     * left out could not be read: the riskier reading) and count_over the counts now.
     */
    async check(developerId: string, environmentId: string, input: PolicyCheckInput): Promise<PolicyCheckResult<G['record']>> {
      await environmentFor(developerId, environmentId, false);
      const infrastructure = input.connector.startsWith('secret:')
        ? await deps.isInfrastructureSecret(developerId, environmentId, input.connector.slice('secret:'.length))
        : false;
      const facts: RequestFacts = {
        ...(input.amount ? { amount: { currency: input.amount.currency.toLowerCase(), minor_units: input.amount.minor_units } } : {}),
        ...(input.recipients ? { recipients: input.recipients.map((r) => r.trim().toLowerCase()) } : {}),
        ...(input.channel ? { channel: input.channel } : {}),
      };
      const d = await decider.decide(developerId, environmentId, {
        connector: input.connector,
        category: input.category,
        task_id: input.task_id ?? null,
        session_id: input.session_id ?? null,
        infrastructure,
        facts,
        ...(input.tool !== undefined ? { tool: input.tool } : {}),
      });
      return {
        decision: d.decision,
        reason: d.reason,
        matched_rules: d.matched_rules,
        ...(d.decision === 'ask' ? { max_scope: d.max_scope } : {}),
        grant: d.grant ? (d.grant.record as G['record']) : null,
        source: d.source,
      };
    },
  };
}

/** As wired in bin: grants come from the approvals domain. */
export type PoliciesService = ReturnType<typeof createPoliciesService<EngineGrant>>;
