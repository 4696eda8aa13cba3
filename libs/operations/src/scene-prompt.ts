/**
 * The prompt of the character and product generate endpoints (REST and MCP): "<scene prompt>", or
 * "<scene prompt>\n\nAdditional details: <details>" when details are given.
 */
export function scenePromptWithDetails(scenePrompt: string, details?: string | null): string {
  const d = typeof details === 'string' ? details.trim() : '';
  return d ? `${scenePrompt.trim()}\n\nAdditional details: ${d}` : scenePrompt.trim();
}
