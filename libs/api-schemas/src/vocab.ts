/** The six model ids of SPEC 1 "Models", in the SPEC's order: the one list every service validates against. */
export const MODEL_IDS = [
  'provA-flash-lite-image',
  'provA-flash-image',
  'provA-pro-image',
  'provB-image-2',
  'provB-image-2.5-flare',
  'provB-image-2.5-sunburst',
] as const;
export type ModelId = (typeof MODEL_IDS)[number];

/** SPEC 4.1: the aspect ratio aliases and ratios a request may name. */
export const ASPECT_RATIOS = [
  'square',
  'portrait',
  'landscape',
  '1:1',
  '2:3',
  '3:2',
  '3:4',
  '4:3',
  '4:5',
  '5:4',
  '9:16',
  '16:9',
  '21:9',
] as const;

/** Ids travel as int64 over gRPC and are read back as safe integers. */
export const ID_MAX = Number.MAX_SAFE_INTEGER;
/** Paging (limit, offset, page) travels as int32 over gRPC. */
export const INT32_MAX = 2_147_483_647;

/** SPEC 4.11: the events a webhook can subscribe to. */
export const QUOTA_EVENTS = ['quota.warning', 'quota.exceeded'] as const;

/** SPEC 2: the roles of an admin user. */
export const ADMIN_ROLES = ['admin', 'super_admin'] as const;
