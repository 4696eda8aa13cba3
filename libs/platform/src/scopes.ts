import { SCOPES, type Scope } from '@imagegen/api-schemas/vocab';

/** The OAuth scopes (SPEC 5) are part of the API's vocabulary (@imagegen/api-schemas/vocab). */
export { SCOPES, type Scope };
export const ALL_SCOPES = Object.keys(SCOPES) as Scope[];
export const isScope = (s: string): s is Scope => Object.hasOwn(SCOPES, s);
