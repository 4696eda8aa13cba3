import { accountTools, modelTools, sessionTools, webhookTools } from './account.js';
import { productTools, sceneTools, searchPresetTools, styleTools } from './assets.js';
import { characterTools } from './characters.js';
import type { ToolDef } from './framework.js';
import { imageCredentialTools, imageTools } from './images.js';

/** The 50 MCP tools: the 47 of issue 8 in its order (tools/list returns them in this order), then the extensions. */
export const ALL_TOOLS: ToolDef[] = [
  ...imageTools,
  ...characterTools,
  ...productTools,
  ...sceneTools,
  ...styleTools,
  ...searchPresetTools,
  ...sessionTools,
  ...accountTools,
  ...webhookTools,
  ...modelTools,
  ...imageCredentialTools,
] as unknown as ToolDef[];
