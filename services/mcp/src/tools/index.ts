import { accountTools, modelTools, sessionTools, webhookTools } from './account.js';
import { productTools, sceneTools, searchPresetTools, styleTools } from './assets.js';
import { characterTools } from './characters.js';
import type { ToolDef } from './framework.js';
import { imageTools } from './images.js';

/** The 47 MCP tools, in the order of issue 8 (tools/list returns them in this order). */
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
] as unknown as ToolDef[];
