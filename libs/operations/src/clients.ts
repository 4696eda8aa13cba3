import { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import { WebhookServiceService } from '@imagegen/contracts/webhooks/v1/webhooks';
import { type Client, createClient, type Logger, type ServiceContext } from '@imagegen/platform';
import { type GenerationCalls, generationCalls } from './generation-calls.js';

/** gRPC clients of every service the REST routes and MCP tools call (addresses resolved per call). */
export interface Clients {
  tenancy: Client<typeof TenancyServiceService>;
  library: Client<typeof LibraryServiceService>;
  assets: Client<typeof AssetsServiceService>;
  generation: Client<typeof GenerationServiceService>;
  usage: Client<typeof UsageServiceService>;
  webhooks: Client<typeof WebhookServiceService>;
  /**
   * GenerateImages, EditImage and UploadForEditing as the tools that wait for them make them (each names its execution; an answer lost
   * with its generation replica is rebuilt from a completed execution: generation-calls.ts).
   */
  generating: GenerationCalls;
  close(): void;
}

export function createClients(ctx: Pick<ServiceContext, 'resolve'> & { logger?: Logger }): Clients {
  const c = {
    tenancy: createClient(TenancyServiceService, () => ctx.resolve('tenancy')),
    library: createClient(LibraryServiceService, () => ctx.resolve('library')),
    assets: createClient(AssetsServiceService, () => ctx.resolve('library')),
    generation: createClient(GenerationServiceService, () => ctx.resolve('generation')),
    usage: createClient(UsageServiceService, () => ctx.resolve('usage')),
    webhooks: createClient(WebhookServiceService, () => ctx.resolve('webhooks')),
  };
  return {
    ...c,
    generating: generationCalls({ generation: c.generation, library: c.library, logger: ctx.logger }),
    close() {
      for (const client of Object.values(c)) client.close();
    },
  };
}
