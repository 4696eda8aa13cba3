import { AssetListQuery, type OperationKey } from '@imagegen/api-schemas';
import type { Clients } from '@imagegen/operations';
import type { Principal } from '@imagegen/platform';
import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { ZodRawShape } from 'zod';
import { defineTool, idString, s, type ToolDef } from './framework.js';

/**
 * The list / get / delete tools of the saved assets (characters, products, scenes, style presets, search
 * presets) share one shape: each resource declares only its tool name, description, scopes, the assets
 * client call and its JSON form (libs/operations present.ts).
 */

type Assets = Clients['assets'];

/** Fields given in the arguments (PATCH semantics: the service changes only these). */
export const presentOf = (args: Record<string, unknown>, fields: string[]) => fields.filter((f) => args[f] !== undefined);
/** null (clear) travels as "absent" plus the field in presentFields. */
export const orUndef = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

interface ToolBase {
  name: string;
  description: string;
  /** The catalogue's operation the tool performs (its scopes come from there). */
  operation: OperationKey;
}

const toolBase = ({ name, description, operation }: ToolBase): ToolBase => ({ name, description, operation });

/**
 * How a tool names one asset: `identifier` (numeric id or exact name, the label of s.identifier) or
 * `id` (numeric id only, the description of s.id).
 */
export type Address = { identifier: string } | { id: string };

function addressInput(a: Address): ZodRawShape {
  return 'id' in a ? { id: s.id(a.id) } : { identifier: s.identifier(a.identifier) };
}

const addressOf = (args: Record<string, unknown>): string => idString((args.identifier ?? args.id) as string | number);

/** The query of the searchable, sortable asset lists (characters, scenes). */
export interface ListQuery {
  limit: number;
  offset: number;
  search?: string;
  sortBy: string;
  cursor?: string;
}

interface ListPage {
  total: number;
  limit: number;
  offset: number;
  hasMore: boolean;
  nextCursor?: string;
}

/**
 * list_<assets>: limit/offset/search/sort_by/cursor -> {data: form[], pagination: {total, limit, offset, hasMore,
 * nextCursor}}.
 */
export function listTool<R extends ListPage, T>(
  def: ToolBase & {
    list: (assets: Assets, query: ListQuery, principal: Principal) => Promise<R>;
    items: (res: R) => T[];
    form: (item: T) => unknown;
  },
): ToolDef {
  return defineTool({
    ...toolBase(def),
    input: AssetListQuery.shape,
    annotations: { readOnlyHint: true },
    async run(args, ctx) {
      const r = await def.list(
        ctx.deps.clients.assets,
        { limit: args.limit, offset: args.offset, search: args.search, sortBy: args.sort_by, cursor: args.cursor },
        ctx.principal,
      );
      return {
        data: {
          data: def.items(r).map(def.form),
          pagination: { total: r.total, limit: r.limit, offset: r.offset, hasMore: r.hasMore, nextCursor: r.nextCursor ?? null },
        },
      };
    },
  }) as ToolDef;
}

type AssetCall<R> = (assets: Assets, req: { identifier: string }, principal: Principal) => Promise<R>;

/** A tool on one asset named by its address: answers {data: form(response of the call)}. */
function oneAssetTool<R>(
  def: ToolBase & { address: Address; call: AssetCall<R>; form: (res: R) => unknown },
  annotations: ToolAnnotations,
): ToolDef {
  return defineTool({
    ...toolBase(def),
    input: addressInput(def.address),
    annotations,
    async run(args, ctx) {
      return { data: { data: def.form(await def.call(ctx.deps.clients.assets, { identifier: addressOf(args) }, ctx.principal)) } };
    },
  });
}

/** get_<asset>: one asset by identifier -> {data: form}. */
export function getTool<T>(def: ToolBase & { address: Address; get: AssetCall<T>; form: (item: T) => unknown }): ToolDef {
  return oneAssetTool({ ...def, call: def.get }, { readOnlyHint: true });
}

/** delete_<asset>: -> {data: form(response)}, by default {data: {deleted: true}}. */
export function deleteTool<R>(def: ToolBase & { address: Address; del: AssetCall<R>; form?: (res: R) => unknown }): ToolDef {
  return oneAssetTool(
    { ...def, call: def.del, form: def.form ?? (() => ({ deleted: true })) },
    { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  );
}
