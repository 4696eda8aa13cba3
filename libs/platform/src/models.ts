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
