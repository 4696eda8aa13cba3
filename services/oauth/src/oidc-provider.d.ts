// oidc-provider ships no type declarations; it is used untyped.
declare module 'oidc-provider' {
  const Provider: any;
  type Provider = any;
  export default Provider;
  export const errors: any;
  export const interactionPolicy: any;
}
