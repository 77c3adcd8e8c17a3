import type Joi from 'joi';

/**
 * joi → JSON Schema 2020-12 (the dialect of OpenAPI 3.1), read from `schema.describe()`, so
 * the document says what the routes validate with (issue 25, item 3): one source of truth.
 *
 * It covers what our schemas use: string (min, max, length, pattern, email, isoDate, uri,
 * guid), number (integer, min, max, greater, less), boolean, object (keys, patterns,
 * unknown), array (items, min, max, length), alternatives (try), any, `valid` (enum),
 * `allow` (null and extra literals), description, default, and `meta({component})`, which
 * names a record: it becomes a `$ref` to `#/components/schemas/<component>`, defined once.
 * joi's `custom` rules (value rules answered 400) have no JSON Schema form and are left out:
 * the document is the shape, the 400 rules are in docs/api.md. Anything else throws, so a
 * schema the converter does not understand fails the start and the tests, never a silent
 * `{}` in the document.
 */

export type JsonSchema = Record<string, unknown>;

interface Description {
  type: string;
  flags?: { presence?: string; only?: boolean; description?: string; default?: unknown; unknown?: boolean; [k: string]: unknown };
  rules?: Array<{ name: string; args?: Record<string, unknown> }>;
  allow?: unknown[];
  keys?: Record<string, Description>;
  patterns?: Array<{ regex?: string; schema?: Description; rule: Description }>;
  items?: Description[];
  matches?: Array<{ schema?: Description }>;
  metas?: Array<Record<string, unknown>>;
  preferences?: unknown;
}

/** Collects the named records (`meta({component})`) met while converting. */
export class SchemaComponents {
  readonly schemas: Record<string, JsonSchema> = {};
  private readonly seen = new Map<string, string>();

  /** The JSON Schema of `schema` (a `$ref` when it is a named record). */
  convert(schema: Joi.Schema): JsonSchema {
    return this.fromDescription(schema.describe() as Description);
  }

  fromDescription(d: Description): JsonSchema {
    const name = d.metas?.find((m) => typeof m.component === 'string')?.component as string | undefined;
    if (name) {
      const body = stableJson({ ...d, metas: undefined, flags: { ...d.flags, presence: undefined }, allow: d.allow?.filter((v) => v !== null).length ? d.allow.filter((v) => v !== null) : undefined });
      const known = this.seen.get(name);
      if (known !== undefined && known !== body) throw new Error(`two different joi schemas are named ${name} (meta component)`);
      if (known === undefined) {
        this.seen.set(name, body);
        this.schemas[name] = {}; // recursion guard
        this.schemas[name] = this.plain({ ...d, allow: (d.allow ?? []).filter((v) => v !== null) });
      }
      const ref = { $ref: `#/components/schemas/${name}` };
      return d.allow?.includes(null) ? { anyOf: [ref, { type: 'null' }] } : ref;
    }
    return this.plain(d);
  }

  private plain(d: Description): JsonSchema {
    const out: JsonSchema = {};
    const flags = d.flags ?? {};
    const allow = d.allow ?? [];
    if (flags.only) {
      // valid(...): exactly these values.
      out.enum = allow;
      return this.common(d, out);
    }
    const extra = allow.filter((v) => v !== null && !fitsType(d.type, v));
    const nullable = allow.includes(null);
    const rules = d.rules ?? [];
    const rule = (name: string) => rules.find((r) => r.name === name);
    switch (d.type) {
      case 'any':
        break;
      case 'string': {
        out.type = 'string';
        for (const r of rules) {
          const limit = r.args?.limit;
          if (r.name === 'min') out.minLength = limit;
          else if (r.name === 'max') out.maxLength = limit;
          else if (r.name === 'length') out.minLength = out.maxLength = limit;
          else if (r.name === 'pattern') {
            const re = patternSource(String(r.args?.regex));
            if (re !== null) out.pattern = re;
          } else if (r.name === 'email') out.format = 'email';
          else if (r.name === 'isoDate') out.format = 'date-time';
          else if (r.name === 'uri') out.format = 'uri';
          else if (r.name === 'guid') out.format = 'uuid';
          else if (r.name !== 'custom') throw new Error(`joi-to-json-schema: string rule ${r.name} is not supported`);
        }
        // allow('') next to min(1): the empty string is accepted too.
        if (allow.includes('') && typeof out.minLength === 'number' && out.minLength > 0) extra.push('');
        break;
      }
      case 'number': {
        out.type = rule('integer') ? 'integer' : 'number';
        for (const r of rules) {
          const limit = r.args?.limit;
          if (r.name === 'min') out.minimum = limit;
          else if (r.name === 'max') out.maximum = limit;
          else if (r.name === 'greater') out.exclusiveMinimum = limit;
          else if (r.name === 'less') out.exclusiveMaximum = limit;
          else if (r.name !== 'integer' && r.name !== 'custom') throw new Error(`joi-to-json-schema: number rule ${r.name} is not supported`);
        }
        break;
      }
      case 'boolean':
        out.type = 'boolean';
        break;
      case 'object': {
        out.type = 'object';
        const keys = d.keys ?? {};
        const names = Object.keys(keys);
        if (names.length > 0 || d.keys !== undefined) {
          out.properties = Object.fromEntries(names.map((k) => [k, this.fromDescription(keys[k]!)]));
          const required = names.filter((k) => keys[k]!.flags?.presence === 'required');
          if (required.length > 0) out.required = required;
        }
        const patterns = d.patterns ?? [];
        if (patterns.length > 0) {
          const pp: Record<string, JsonSchema> = {};
          for (const p of patterns) {
            if (!p.regex) throw new Error('joi-to-json-schema: object patterns keyed by a schema are not supported');
            const src = patternSource(p.regex);
            if (src === null || src === '.*' || src === '^.*$') out.additionalProperties = this.fromDescription(p.rule);
            else pp[src] = this.fromDescription(p.rule);
          }
          if (Object.keys(pp).length > 0) out.patternProperties = pp;
        }
        if (out.additionalProperties === undefined) {
          // Unknown keys are refused (check() validates with allowUnknown: false) unless
          // the schema says unknown(true), or it names no keys at all (Joi.object()).
          if (flags.unknown === true || (d.keys === undefined && patterns.length === 0)) out.additionalProperties = true;
          else out.additionalProperties = false;
        }
        for (const r of rules) {
          if (r.name === 'min') out.minProperties = r.args?.limit;
          else if (r.name === 'max') out.maxProperties = r.args?.limit;
          else if (r.name !== 'custom') throw new Error(`joi-to-json-schema: object rule ${r.name} is not supported`);
        }
        break;
      }
      case 'array': {
        out.type = 'array';
        const items = d.items ?? [];
        if (items.length === 1) out.items = this.fromDescription(items[0]!);
        else if (items.length > 1) out.items = { anyOf: items.map((i) => this.fromDescription(i)) };
        for (const r of rules) {
          const limit = r.args?.limit;
          if (r.name === 'min') out.minItems = limit;
          else if (r.name === 'max') out.maxItems = limit;
          else if (r.name === 'length') out.minItems = out.maxItems = limit;
          else if (r.name !== 'custom') throw new Error(`joi-to-json-schema: array rule ${r.name} is not supported`);
        }
        break;
      }
      case 'alternatives':
        out.anyOf = (d.matches ?? []).map((m) => {
          if (!m.schema) throw new Error('joi-to-json-schema: conditional alternatives are not supported');
          return this.fromDescription(m.schema);
        });
        break;
      default:
        throw new Error(`joi-to-json-schema: joi type ${d.type} is not supported`);
    }
    let result = this.common(d, out);
    if (nullable) result = addNull(result);
    if (extra.length > 0) result = { anyOf: [result, { enum: extra }] };
    return result;
  }

  private common(d: Description, out: JsonSchema): JsonSchema {
    const flags = d.flags ?? {};
    if (typeof flags.description === 'string') out.description = flags.description;
    if (flags.default !== undefined && typeof flags.default !== 'function') out.default = flags.default;
    return out;
  }
}

/** JSON with keys sorted, so two descriptions of one schema compare equal whatever their key order. */
function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (x && typeof x === 'object' && !Array.isArray(x)
    ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, (x as Record<string, unknown>)[k]]))
    : x));
}

function fitsType(type: string, v: unknown): boolean {
  if (type === 'any') return true;
  if (type === 'string') return typeof v === 'string';
  if (type === 'number') return typeof v === 'number';
  if (type === 'boolean') return typeof v === 'boolean';
  if (type === 'object') return typeof v === 'object' && v !== null && !Array.isArray(v);
  if (type === 'array') return Array.isArray(v);
  return false;
}

/** `type: [t, 'null']`, or an anyOf with null where the schema has no single type. */
function addNull(s: JsonSchema): JsonSchema {
  if (typeof s.type === 'string') return { ...s, type: [s.type, 'null'] };
  if (Array.isArray(s.enum)) return { ...s, enum: [...(s.enum as unknown[]), null] };
  return { anyOf: [s, { type: 'null' }] };
}

/**
 * `/source/flags` as joi describes a RegExp → the source for JSON Schema's `pattern`
 * (ECMA-262, no flags). A pattern with flags cannot be said there: it is left out (null).
 */
function patternSource(s: string): string | null {
  const m = /^\/(.*)\/([a-z]*)$/s.exec(s);
  if (!m) return s;
  return m[2] === '' || m[2] === 'u' ? m[1]! : null;
}

/** One joi schema to JSON Schema, with its named records gathered into `components`. */
export function joiToJsonSchema(schema: Joi.Schema, components = new SchemaComponents()): JsonSchema {
  return components.convert(schema);
}
