import {
  CharacterInput,
  CharacterUpdateInput,
  checkedByService,
  ImageListQuery,
  StylePresetBody,
  snakeCased,
  TenantBody,
} from '@imagegen/api-schemas';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { describe, expect, test } from 'vitest';
import { formatValidationErrors, wireSchema } from '../src/validation.js';

// The body validator of the gateway (app.ts): strict types, every problem reported.
const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, coerceTypes: false });
addFormats(ajv);

/** The details a route answers for `body`, validated with the schema derived from `zod`. */
function details(zod: Parameters<typeof wireSchema>[0], body: unknown): string[] {
  const validate = ajv.compile(wireSchema(zod));
  return validate(body) ? [] : formatValidationErrors(validate.errors as never, 'body');
}

describe('request schemas derived from the one zod definition', () => {
  test('a nullable field with rules is a type list, so ajv words its problems as the SPEC does', () => {
    const props = wireSchema(CharacterInput).properties as Record<string, Record<string, unknown>>;
    expect(props.description).toMatchObject({ type: ['string', 'null'], maxLength: 500 });
    expect(props.description.anyOf).toBeUndefined();
    expect(details(CharacterInput, { character_name: 'Zoe', base_prompt: 'a tall pilot', description: 'x'.repeat(501) })).toEqual([
      'description must be at most 500 characters',
    ]);
    expect(details(CharacterInput, { character_name: 'Zoe', base_prompt: 'a tall pilot', description: null, tags: null })).toEqual([]);
    expect(details(CharacterInput, { character_name: null, description: 5 })).toEqual([
      'base_prompt is required',
      'character_name must be a string',
      'description must be a string,null',
    ]);
  });

  test('a union of types with null (provider credentials) merges into one type list with every rule', () => {
    const pool = (wireSchema(TenantBody).properties as Record<string, any>).provider_credentials.properties.provA;
    expect(pool).toMatchObject({ type: ['string', 'array', 'null'], minLength: 1, maxLength: 1000, maxItems: 5 });
    const base = { tenant_id: 'acme', tenant_name: 'Acme', contact_email: 'ops@acme.example' };
    expect(details(TenantBody, { ...base, provider_credentials: { provA: ['a', 'b', 'c', 'd', 'e', 'f'], provC: 'x' } })).toEqual([
      'provider_credentials.provC is not allowed',
      'provider_credentials.provA must have at most 5 items',
    ]);
    expect(details(TenantBody, { ...base, provider_credentials: { provA: null, provB: 'key' } })).toEqual([]);
  });

  test('fields the service checks keep only their JSON type, and stay required when they were', () => {
    // base_prompt's 10-2000 rule and the aspect ratio list are the service's (SPEC 7 texts)
    expect(details(CharacterInput, { character_name: 'Zoe', base_prompt: 'short', preferred_aspect_ratio: '7:1' })).toEqual([]);
    expect(details(CharacterInput, { character_name: 'Zoe' })).toEqual(['base_prompt is required']);
    expect(details(CharacterUpdateInput, {})).toEqual([]);
    const named = checkedByService(StylePresetBody, ['name']);
    expect(named.safeParse({ name: '' }).success).toBe(true);
    expect(named.safeParse({}).success).toBe(false);
    expect(StylePresetBody.safeParse({ name: '' }).success).toBe(false);
  });

  test('unknown fields: ignored where the REST body has always ignored them, refused where it refuses them', () => {
    expect(details(CharacterInput, { character_name: 'Zoe', base_prompt: 'a tall pilot', colour: 'red' })).toEqual([]);
    expect(details(TenantBody, { tenant_id: 'a', tenant_name: 'A', contact_email: 'a@a.example', provider_credentials: { x: 1 } })).toEqual(
      ['provider_credentials.x is not allowed'],
    );
  });

  test('a REST query in camelCase gives its MCP tool the same fields in snake_case', () => {
    const shape = snakeCased(ImageListQuery.shape);
    expect(Object.keys(shape)).toContain('has_negative_prompt');
    expect(Object.keys(shape)).toContain('product_reference_id');
    expect(Object.keys(shape)).toHaveLength(Object.keys(ImageListQuery.shape).length);
    expect(shape.date_from).toBe(ImageListQuery.shape.dateFrom);
  });
});
