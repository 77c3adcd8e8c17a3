import type { Queryable } from '../store/db.js';

/** A process running a gateway proxy (migrations/0029_nodes.ts; docs/deploy.md). */
export interface NodeRow {
  id: string;
  /** Where its RPC listens for other nodes (hosts/rpc.ts). */
  rpc_url: string;
  started_at: number;
  /** Wall-clock ms of its last heartbeat. */
  seen_at: number;
}

export const nodesStore = {
  async insert(db: Queryable, row: NodeRow): Promise<void> {
    await db('nodes').insert(row);
  },
  /** Returns rows updated: 0 when the row was pruned meanwhile (a node paused past the prune age). */
  seen(db: Queryable, id: string, now: number): Promise<number> {
    return db('nodes').where({ id }).update({ seen_at: now });
  },
  async rpcUrl(db: Queryable, id: string): Promise<string | null> {
    const row = await db<NodeRow>('nodes').where({ id }).first('rpc_url');
    return row?.rpc_url ?? null;
  },
  async remove(db: Queryable, id: string): Promise<void> {
    await db('nodes').where({ id }).delete();
  },
  /** Rows not seen since `before` (nodes that died without leaving): deleted; how many. */
  prune(db: Queryable, before: number): Promise<number> {
    return db('nodes').where('seen_at', '<', before).delete();
  },
  list(db: Queryable): Promise<NodeRow[]> {
    return db<NodeRow>('nodes').orderBy('started_at', 'asc');
  },
};
