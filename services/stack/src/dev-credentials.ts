/** The development Content Credentials chain (issue 39), for the all-in-one and for tests that run the services alone. */
export { type DevelopmentChain, ensureDevelopmentChain } from '@imagegen/library/credentials/dev-chain.ts';
