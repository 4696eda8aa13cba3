export * from './common.js';
export * from './json-schema.js';
export * from './operations.js';
export * from './params.js';
export * from './requests.js';
export * from './resources.js';
export * from './vocab.js';
