import { PROVIDERS, type Provider } from '@imagegen/api-schemas/vocab';

/** The provider serving a model: model ids start with the provider's name (provA-..., provB-...). */
export function providerOfModel(model: string): Provider {
  return PROVIDERS.find((p) => model.startsWith(`${p}-`)) ?? PROVIDERS[0];
}
