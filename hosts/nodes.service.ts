import { randomBytes } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import type { Db } from '../store/db.js';
import type { Logger } from '../lib/log.js';
import { nodesStore, type NodeRow } from './nodes.store.js';
import { hostToken } from './rpc.js';

/** How often a node says it is alive (a cheap UPDATE of its own row). */
export const NODE_HEARTBEAT_MS = 10_000;
/** A node row not seen for this long is deleted by any other node (it died without leaving). */
export const NODE_PRUNE_AFTER_MS = 5 * 60_000;
/**
 * Deadline of one poke. The decision has been answered already; a holder that does not
 * answer within this is left to its store poll (approvals.service.ts, DEFAULT_WAIT_POLL_MS).
 */
export const POKE_TIMEOUT_MS = 2000;

/** What a node's RPC accepts for the node calls: `Bearer HMAC-SHA256(node-rpc subkey, node id)`. */
export function nodeToken(subkey: Buffer, nodeId: string): string {
  return hostToken(subkey, nodeId);
}

export interface NodesDeps {
  db: Db;
  log: Logger;
  /** keyring.deriveSubkey('node-rpc'): every node of one deployment derives the same one. */
  subkey: Buffer;
  /** The HTTP client for pokes (keep-alive: a poke to a node seen before reuses its connection). */
  dispatcher: Dispatcher;
  /** Wall clock: liveness is about real time, not the service clock a test moves. */
  wallNowMs?: () => number;
  heartbeatMs?: number;
}

/**
 * The nodes of a deployment (docs/deploy.md, "Nodes"): every process running a gateway
 * proxy (`gateway start`, `gateway host`) registers itself with the address of its RPC for
 * its life, under an id of its own made at start. A decision made on one node reaches a
 * request held on another through `notifyDecided`: a poke that carries only the approval
 * id, so the holder reads the outcome from the store itself and a forged or replayed poke
 * can at most cause a read. The store poll stays the fallback for every failure here.
 */
export function createNodesService(deps: NodesDeps) {
  const { db, log } = deps;
  const now = deps.wallNowMs ?? Date.now;
  const heartbeatMs = deps.heartbeatMs ?? NODE_HEARTBEAT_MS;
  const id = `node_${randomBytes(12).toString('hex')}`;
  let url: string | null = null;
  let startedAt = 0;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  async function beat(): Promise<void> {
    if (!url || closed) return;
    const t = now();
    // Pruned meanwhile (this process was paused past the prune age): it registers again.
    if ((await nodesStore.seen(db, id, t)) === 0) await nodesStore.insert(db, { id, rpc_url: url, started_at: startedAt, seen_at: t });
    await nodesStore.prune(db, t - NODE_PRUNE_AFTER_MS);
  }

  /** Registers this node at `rpcUrl` and heartbeats until close(). */
  async function register(rpcUrl: string): Promise<void> {
    url = rpcUrl;
    startedAt = now();
    await nodesStore.prune(db, startedAt - NODE_PRUNE_AFTER_MS);
    await nodesStore.insert(db, { id, rpc_url: rpcUrl, started_at: startedAt, seen_at: startedAt });
    timer = setInterval(() => {
      void beat().catch((err) => log.warn({ err, node_id: id }, 'node heartbeat failed; retrying at the next one'));
    }, heartbeatMs);
    timer.unref();
  }

  /**
   * Tells node `nodeId` that approval `approvalId` was decided. Never throws and never waits
   * longer than POKE_TIMEOUT_MS; true when the holder took it. A node that is gone (no row,
   * refused, timed out) is logged at debug: its agents' connections went with it.
   */
  async function notifyDecided(nodeId: string, approvalId: string): Promise<boolean> {
    if (nodeId === id || closed) return false;
    try {
      const target = await nodesStore.rpcUrl(db, nodeId);
      if (!target) return false;
      const res = await request(`${target}/approvals/decided`, {
        method: 'POST',
        dispatcher: deps.dispatcher,
        headers: { authorization: `Bearer ${nodeToken(deps.subkey, nodeId)}`, 'content-type': 'application/json' },
        body: JSON.stringify({ approval_id: approvalId }),
        headersTimeout: POKE_TIMEOUT_MS,
        bodyTimeout: POKE_TIMEOUT_MS,
        signal: AbortSignal.timeout(POKE_TIMEOUT_MS),
      });
      await res.body.dump();
      if (res.statusCode !== 204) log.warn({ node_id: nodeId, approval_id: approvalId, status: res.statusCode }, 'a node refused the decision poke; its poll will find the decision');
      return res.statusCode === 204;
    } catch (err) {
      log.debug({ node_id: nodeId, approval_id: approvalId, err: (err as Error).message }, 'the holding node could not be poked; its poll will find the decision');
      return false;
    }
  }

  /** Leaves the table (a clean stop); a killed node's row is pruned by the others. */
  async function close(): Promise<void> {
    closed = true;
    if (timer) clearInterval(timer);
    timer = null;
    if (url) await nodesStore.remove(db, id).catch((err) => log.warn({ err, node_id: id }, 'the node row could not be removed; others prune it'));
  }

  return {
    id,
    /** What this node's RPC expects on node calls. */
    token: () => nodeToken(deps.subkey, id),
    register,
    notifyDecided,
    list: (): Promise<NodeRow[]> => nodesStore.list(db),
    close,
  };
}

export type NodesService = ReturnType<typeof createNodesService>;
