import type { StartService } from '@imagegen/platform';

// PLACEHOLDER while the service is being written in parallel; replaced by the real implementation.
export const start: StartService = async () => ({ stop: async () => {} });
