/** The six model ids of SPEC 1 "Models": defined once with the API shapes (@imagegen/api-schemas). */
export { MODEL_IDS, type ModelId } from '@imagegen/api-schemas/vocab';
