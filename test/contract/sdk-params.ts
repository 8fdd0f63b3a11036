/**
 * Which query parameters the vendor's SDK (`@raindrop-ai/query`) knows for each of its operations,
 * read from the SDK's own source rather than listed by hand: each `src/funcs/*.ts` names its path
 * (`pathToFunc("/v1/...")`), its operation id and the query keys it encodes
 * (`encodeFormQuery({...})`, `encodeDeepObjectQuery({...})`); a deep-object key's sub-keys come
 * from the operation's `<Name>Request$Outbound` type in `src/models/operations/*.ts`
 * (`timestamp` → `timestamp[gte]`, …; a map such as `properties` → `properties[*]`,
 * `properties[*][eq]`, …). Parsed with the TypeScript compiler's parser, so a new SDK version is
 * read as it is.
 *
 * Usage (a connector's requests against the emulator, via its `onRequest` hook):
 *
 *   const operation = findSdkOperation(info.path);        // by concrete path, e.g. /v1/events/abc
 *   const unknown = unknownSdkParams(info.path, info.query); // names the SDK does not know there
 */

import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import ts from 'typescript';

type ParamStyle = 'form' | 'deepObject';

export interface SdkOperation {
  /** The SDK's operation id, e.g. `events_list`. */
  readonly operationId: string;
  /** e.g. `/v1/events/{id}`. */
  readonly path: string;
  /** Wire names; `*` stands for any key of a map (`properties[*]`, `properties[*][gte]`). */
  readonly params: readonly string[];
  /** Top-level wire name → how the SDK encodes it. */
  readonly styles: Readonly<Record<string, ParamStyle>>;
}

const SDK_SRC = join(dirname(createRequire(import.meta.url).resolve('@raindrop-ai/query/package.json')), 'src');

let cached: readonly SdkOperation[] | undefined;

/** Every operation of the installed SDK, in file order (16 for 0.1.13). */
export function sdkOperations(): readonly SdkOperation[] {
  cached ??= readdirSync(join(SDK_SRC, 'funcs'))
    .filter((file) => file.endsWith('.ts'))
    .sort()
    .map((file) => readOperation(file));
  return cached;
}

/**
 * The operation serving a concrete request path (`/v1/events/count`, `/v1/events/abc`), preferring
 * a literal path over a template; undefined when the SDK has none.
 */
export function findSdkOperation(pathname: string): SdkOperation | undefined {
  const operations = sdkOperations();
  const exact = operations.find((op) => op.path === pathname);
  if (exact) return exact;
  const segments = pathname.split('/');
  return operations.find((op) => {
    const template = op.path.split('/');
    return (
      template.length === segments.length && template.every((part, i) => part === segments[i] || /^\{.+\}$/.test(part))
    );
  });
}

/** Whether `name` is a query parameter the SDK knows for `operation` (matching `*` map keys). */
export function sdkKnowsParam(operation: SdkOperation, name: string): boolean {
  return operation.params.some((pattern) => matches(pattern, name));
}

/**
 * The parameter names of `query` that the SDK does not know for the operation at `pathname`
 * (every name, when the SDK has no such operation).
 */
export function unknownSdkParams(pathname: string, query: URLSearchParams | Iterable<string>): string[] {
  const names = query instanceof URLSearchParams ? [...new Set(query.keys())] : [...new Set(query)];
  const operation = findSdkOperation(pathname);
  return names.filter((name) => operation === undefined || !sdkKnowsParam(operation, name));
}

function matches(pattern: string, name: string): boolean {
  if (!pattern.includes('[*]')) return pattern === name;
  const escaped = pattern
    .split('[*]')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('\\[[^\\]]+\\]');
  return new RegExp(`^${escaped}$`).test(name);
}

function parse(path: string): ts.SourceFile {
  return ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
}

function readOperation(file: string): SdkOperation {
  const source = parse(join(SDK_SRC, 'funcs', file));
  let path: string | undefined;
  let operationId: string | undefined;
  let requestType: string | undefined;
  const styles: Record<string, ParamStyle> = {};
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression)) {
      const callee = node.expression.text;
      const first = node.arguments[0];
      if (callee === 'pathToFunc' && first && ts.isStringLiteral(first)) path = first.text;
      if (
        (callee === 'encodeFormQuery' || callee === 'encodeDeepObjectQuery') &&
        first &&
        ts.isObjectLiteralExpression(first)
      ) {
        for (const property of first.properties) {
          const name =
            property.name && (ts.isStringLiteral(property.name) || ts.isIdentifier(property.name))
              ? property.name.text
              : undefined;
          if (name !== undefined) styles[name] = callee === 'encodeFormQuery' ? 'form' : 'deepObject';
        }
      }
    }
    if (
      ts.isPropertyAssignment(node) &&
      ts.isIdentifier(node.name) &&
      node.name.text === 'operationID' &&
      ts.isStringLiteral(node.initializer)
    ) {
      operationId = node.initializer.text;
    }
    // `request: operations.EventsListRequest` (optional or not) in `$do`.
    if (ts.isParameter(node) && ts.isIdentifier(node.name) && node.name.text === 'request' && node.type) {
      const ref = firstTypeReference(node.type);
      if (ref !== undefined) requestType = ref;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  if (path === undefined || operationId === undefined)
    throw new Error(`sdk-params: cannot read the path or operation id of funcs/${file}`);
  const params: string[] = [];
  const deep = Object.entries(styles).filter(([, style]) => style === 'deepObject');
  const aliases =
    deep.length > 0 && requestType !== undefined
      ? typeAliases(parse(join(SDK_SRC, 'models', 'operations', file)))
      : new Map<string, ts.TypeNode>();
  const outbound = requestType === undefined ? undefined : aliases.get(`${requestType}$Outbound`);
  for (const [name, style] of Object.entries(styles)) {
    if (style === 'form') {
      params.push(name);
      continue;
    }
    const member =
      outbound && ts.isTypeLiteralNode(outbound)
        ? outbound.members.find((m) => ts.isPropertySignature(m) && propertyName(m) === name)
        : undefined;
    if (!member || !ts.isPropertySignature(member) || !member.type)
      throw new Error(
        `sdk-params: funcs/${file} encodes ${name}, but ${requestType ?? '?'}$Outbound has no type for it`,
      );
    params.push(...expand(name, member.type, aliases, 0));
  }
  return { operationId, path, params: [...new Set(params)].sort(), styles };
}

function firstTypeReference(type: ts.TypeNode): string | undefined {
  if (ts.isTypeReferenceNode(type))
    return ts.isQualifiedName(type.typeName) ? type.typeName.right.text : type.typeName.text;
  if (ts.isUnionTypeNode(type)) {
    for (const member of type.types) {
      const found = firstTypeReference(member);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

function typeAliases(source: ts.SourceFile): Map<string, ts.TypeNode> {
  const aliases = new Map<string, ts.TypeNode>();
  for (const statement of source.statements) {
    if (ts.isTypeAliasDeclaration(statement)) aliases.set(statement.name.text, statement.type);
  }
  return aliases;
}

function propertyName(member: ts.PropertySignature): string | undefined {
  const name = member.name;
  return ts.isIdentifier(name) || ts.isStringLiteral(name) ? name.text : undefined;
}

/** The wire names a value of `type` under `prefix` takes in deep-object encoding. */
function expand(prefix: string, type: ts.TypeNode, aliases: ReadonlyMap<string, ts.TypeNode>, depth: number): string[] {
  if (depth > 8) throw new Error(`sdk-params: ${prefix} nests too deeply`);
  if (ts.isParenthesizedTypeNode(type)) return expand(prefix, type.type, aliases, depth);
  if (ts.isUnionTypeNode(type)) return type.types.flatMap((member) => expand(prefix, member, aliases, depth));
  if (
    type.kind === ts.SyntaxKind.UndefinedKeyword ||
    (ts.isLiteralTypeNode(type) && type.literal.kind === ts.SyntaxKind.NullKeyword)
  )
    return [];
  if (ts.isTypeReferenceNode(type) && ts.isIdentifier(type.typeName)) {
    const target = aliases.get(type.typeName.text);
    return target === undefined ? [prefix] : expand(prefix, target, aliases, depth + 1);
  }
  if (ts.isTypeLiteralNode(type)) {
    return type.members.flatMap((member) => {
      if (ts.isPropertySignature(member) && member.type) {
        const name = propertyName(member);
        return name === undefined ? [] : expand(`${prefix}[${name}]`, member.type, aliases, depth + 1);
      }
      if (ts.isIndexSignatureDeclaration(member)) return expand(`${prefix}[*]`, member.type, aliases, depth + 1);
      return [];
    });
  }
  // string, number, boolean, Date, arrays: one parameter (arrays repeat it).
  return [prefix];
}
