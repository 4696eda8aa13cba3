/** The twelve OAuth scopes of SPEC 5, with the wording the sign-in page shows. Issued by oauth, checked by mcp. */
export const SCOPES = {
  'images:generate': 'Generate new images',
  'images:edit': 'Edit images and upload images for editing',
  'images:read': 'View your images',
  'images:delete': 'Delete images',
  'characters:manage': 'Create, change and delete characters',
  'characters:read': 'View characters',
  'products:manage': 'Create, change and delete products',
  'products:read': 'View products',
  'styles:manage': 'Create, change and delete style presets and scenes',
  'styles:read': 'View style presets and scenes',
  'sessions:read': 'View sessions and execution logs',
  'analytics:read': 'View usage, quota and profile',
} as const;

export type Scope = keyof typeof SCOPES;
export const ALL_SCOPES = Object.keys(SCOPES) as Scope[];
export const isScope = (s: string): s is Scope => Object.hasOwn(SCOPES, s);
