import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { bind, type GrpcServiceBinding, type ServiceContext, type Sql } from '@imagegen/platform';
import type { ContentCredentials } from '../credentials/content-credentials.js';
import { cursorKey } from '../images/cursor.js';
import { characterHandlers } from './characters.js';
import { productHandlers } from './products.js';
import { createQuotaGuard } from './quota.js';
import { resolveHandlers } from './resolve.js';
import { sceneHandlers } from './scenes.js';
import { runSearchPresetHandler, searchPresetHandlers } from './search-presets.js';
import { stylePresetHandlers } from './style-presets.js';
/**
 * Saved assets of the library service (AssetsService, proto/imagegen/library/v1/assets.proto): characters,
 * products, scene presets (= reference groups), style presets, search presets, and the generation-facing
 * ResolveGenerationAssets / MarkAssetsUsed. Served on the library's gRPC server, tables in schema `library`
 * (migrations 100+). See docs/design/assets.md.
 */
export function createAssets(deps: { sql: Sql; ctx: ServiceContext; credentials: ContentCredentials }): {
  binding: GrpcServiceBinding;
  stop(): Promise<void>;
} {
  const { sql, ctx } = deps;
  const logger = ctx.logger.child({ component: 'assets' });
  const quota = createQuotaGuard(ctx);
  const storage = ctx.storage;
  const key = cursorKey(ctx.config).key;
  const binding = bind(AssetsServiceService, {
    ...characterHandlers({ sql, storage, cursorKey: key }),
    ...productHandlers({ sql, storage, config: ctx.config, quota, logger, cursorKey: key }),
    ...sceneHandlers({ sql, storage, config: ctx.config, quota, logger, cursorKey: key, credentials: deps.credentials }),
    ...stylePresetHandlers({ sql, cursorKey: key }),
    ...searchPresetHandlers({ sql }),
    runSearchPreset: runSearchPresetHandler({ sql, storage, cursorKey: key }),
    ...resolveHandlers({ sql }),
  });
  return {
    binding,
    async stop() {
      quota.close();
    },
  };
}
