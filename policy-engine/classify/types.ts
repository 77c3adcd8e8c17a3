/**
 * Shapes shared by the classifier tables. PURE: types and tiny helpers only.
 */
import type { Category } from '../categories.js';

/** An HTTP request as the gateway sees it, after TLS interception. */
export interface ClassifyRequest {
  /** The request method as sent (any case). */
  readonly method: string;
  /** The upstream host, with or without a port. */
  readonly host: string;
  /** The request target: path with query string (an absolute URL is also accepted). */
  readonly path: string;
  /** Header names lowercased (Node's IncomingHttpHeaders shape). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /**
   * The request body when the gateway buffered it; undefined when it did not. Rows whose
   * answer depends on the body (Google batch, Gmail label and filter changes) then assume
   * the dangerous reading; see needsBody().
   */
  readonly body?: Uint8Array | string | undefined;
  /** Content-Type; defaults to the `content-type` header. */
  readonly contentType?: string | undefined;
}

export interface Classification {
  /** The connector hint given by the caller, else what the host and path imply, else null. */
  readonly connector: string | null;
  readonly category: Category;
  /** The table row that decided, e.g. `gmail.messages.send`, `generic.write`. */
  readonly rule: string;
  /** For a Google batch: each part's own classification, in body order. */
  readonly parts?: readonly Classification[];
}

/** A table's verdict before the connector is attached. */
export interface Verdict {
  readonly category: Category;
  readonly rule: string;
  readonly parts?: readonly Classification[];
}

/** A request with its host, path, query, methods and headers normalized once. */
export interface ParsedRequest {
  /** The method actually on the wire, uppercased. */
  readonly method: string;
  /** Values of X-HTTP-Method-Override, uppercased, in order (usually zero or one). */
  readonly overrides: readonly string[];
  /** Lowercased, without port or trailing dot. */
  readonly host: string;
  /** Path segments, percent-decoded, empty and dot segments resolved away. */
  readonly segments: readonly string[];
  /** The same segments lowercased, for matching keywords (never ids). */
  readonly lower: readonly string[];
  readonly query: URLSearchParams;
  readonly headers: ClassifyRequest['headers'];
  readonly body: Uint8Array | string | undefined;
  readonly contentType: string | undefined;
}
