/**
 * Table rows: a method class, a path pattern, an optional extra condition (query or
 * body), a category and a name. When several rows of a table match, the most dangerous
 * one wins (DANGER_ORDER), so a table's row order never decides an outcome.
 */
import type { Category } from '../categories.js';
import { matchPath, methodMatches, mostDangerousVerdict } from './http.js';
import type { MethodClass } from './http.js';
import type { ParsedRequest, Verdict } from './types.js';

export interface Row {
  readonly rule: string;
  readonly methods: MethodClass;
  /** Pattern over the lowercased segments after the API's prefix (see matchPath). */
  readonly path: readonly string[];
  readonly category: Category;
  /** Extra condition on the query or body. */
  readonly when?: (p: ParsedRequest) => boolean;
}

export function matchRows(rows: readonly Row[], p: ParsedRequest, method: string, rel: readonly string[]): Verdict | null {
  const hits: Verdict[] = [];
  for (const row of rows) {
    if (!methodMatches(method, row.methods)) continue;
    if (!matchPath(rel, row.path)) continue;
    if (row.when !== undefined && !row.when(p)) continue;
    hits.push({ category: row.category, rule: row.rule });
  }
  return hits.length === 0 ? null : mostDangerousVerdict(hits);
}
