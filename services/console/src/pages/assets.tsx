/**
 * Saved assets (issue 38 item 5): characters, products, scenes and style presets. Each kind lists with the API's
 * search, 100 at a time ("Show more" continues from the page's cursor), creates and edits in a dialog, deletes
 * after a confirmation. Reference images of characters and scenes are picked from the
 * gallery (GET /api/images); a product is created from its image URL; a character or a product generates from its
 * own endpoint and the result is shown in place, linked to the gallery.
 */
import { useState } from 'preact/hooks';
import { ASPECT_RATIOS, PRODUCT_ASPECT_RATIOS } from '../../../../libs/api-schemas/src/vocab';
import { api, networkProblem, type Problem, problem } from '../api';
import type { CharacterItem, ProductItem, SceneItem, StylePreset } from '../components/api-types';
import { ImagePicker, type PickedImage } from '../components/image-picker';
import { Button, Dialog, ErrorBanner, Field, Table, toast, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, setQuery } from '../router';
import './tenant-pages.css';

/** SPEC 4.4: the ratios of a product generation. */
const PRODUCT_RATIOS = PRODUCT_ASPECT_RATIOS;

const KINDS = {
  characters: 'Characters',
  products: 'Products',
  scenes: 'Scenes',
  'style-presets': 'Style presets',
} as const;
type Kind = keyof typeof KINDS;

/** One row of any kind's list. */
interface Row {
  id: number;
  name: string;
  summary: string;
  thumbnail: string | null;
  used: number | null;
}

export default function Assets({ params, query }: PageProps) {
  const kind: Kind = (params.kind && params.kind in KINDS ? params.kind : 'characters') as Kind;
  const label = KINDS[kind];
  usePageTitle(`${label} · Saved assets`);
  const search = query.get('q') ?? '';
  const [typed, setTyped] = useState(search);
  const [editing, setEditing] = useState<number | 'new' | null>(null);
  const [generating, setGenerating] = useState<Row | null>(null);
  const [deleting, setDeleting] = useState<Row | null>(null);
  const [deleteProblem, setDeleteProblem] = useState<Problem>();

  const list = useLoad<RowPage>(() => loadRows(kind, search), [kind, search]);
  /** The pages read after the first ("Show more"), with the first page they follow: none once it is read again. */
  const [later, setLater] = useState<{ after?: RowPage; pages: RowPage[] }>({ pages: [] });
  const [moreProblem, setMoreProblem] = useState<Problem>();
  const [loadingMore, setLoadingMore] = useState(false);
  const pages = list.value ? [list.value, ...(later.after === list.value ? later.pages : [])] : [];
  const rows = pages.flatMap((p) => p.rows);
  const next = pages.at(-1)?.next;
  async function showMore(cursor: string) {
    const first = list.value;
    setLoadingMore(true);
    const r = await loadRows(kind, search, cursor).catch((err) => ({ value: undefined, problem: networkProblem(err) }));
    setLoadingMore(false);
    setMoreProblem(r.problem);
    const page = r.value;
    if (page) setLater((l) => ({ after: first, pages: l.after === first ? [...l.pages, page] : [page] }));
  }

  async function remove(row: Row) {
    const r = await deleteAsset(kind, row.id);
    const p = problem(r);
    setDeleteProblem(p);
    if (p) return;
    toast(`Deleted ${row.name}`);
    setDeleting(null);
    list.reload();
  }

  return (
    <>
      <h1>Saved assets</h1>
      <nav aria-label="Asset kinds">
        <ul class="tabs">
          {(Object.keys(KINDS) as Kind[]).map((k) => (
            <li key={k}>
              <Link href={`/assets/${k}`} aria-current={k === kind ? 'page' : undefined}>
                {KINDS[k]}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <h2>{label}</h2>
      <div class="toolbar">
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            setQuery({ q: typed.trim() || undefined });
          }}
        >
          <Field label={`Search ${label.toLowerCase()}`} type="search" value={typed} onInput={setTyped} max={200} />
          <Button type="submit">Search</Button>
        </form>
        <Button variant="primary" onClick={() => setEditing('new')}>
          New {singular(kind)}
        </Button>
      </div>
      <ErrorBanner problem={list.problem} />
      <Table
        caption={`${label}${search ? ` matching “${search}”` : ''}`}
        rows={rows}
        rowKey={(r) => String(r.id)}
        empty={list.loading ? 'Loading…' : search ? 'Nothing matches.' : `No ${label.toLowerCase()} yet.`}
        columns={[
          {
            label: 'Image',
            cell: (r) =>
              r.thumbnail ? (
                <img src={r.thumbnail} alt="" width={56} height={56} loading="lazy" class="cover" />
              ) : (
                <span class="muted">—</span>
              ),
          },
          { label: 'Name', cell: (r) => <strong>{r.name}</strong> },
          { label: 'Details', cell: (r) => <span class="clip">{r.summary}</span> },
          { label: 'Used', cell: (r) => (r.used === null ? '—' : r.used) },
          {
            label: 'Actions',
            cell: (r) => (
              <div class="row">
                <Button aria-label={`Edit ${r.name}`} onClick={() => setEditing(r.id)}>
                  Edit
                </Button>
                {(kind === 'characters' || kind === 'products') && (
                  <Button aria-label={`Generate from ${r.name}`} onClick={() => setGenerating(r)}>
                    Generate
                  </Button>
                )}
                <Button
                  variant="danger"
                  aria-label={`Delete ${r.name}`}
                  onClick={() => {
                    setDeleteProblem(undefined);
                    setDeleting(r);
                  }}
                >
                  Delete
                </Button>
              </div>
            ),
          },
        ]}
      />
      {list.value && next && (
        <div class="row">
          <p class="muted" data-testid="assets-shown">
            {rows.length} of {list.value.total} shown
          </p>
          <Button onClick={() => void showMore(next)} busy={loadingMore}>
            Show more {label.toLowerCase()}
          </Button>
        </div>
      )}
      <ErrorBanner problem={moreProblem} />
      {editing !== null && (
        <Editor
          kind={kind}
          id={editing === 'new' ? undefined : editing}
          onClose={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            list.reload();
          }}
        />
      )}
      {generating && <Generate kind={kind as 'characters' | 'products'} row={generating} onClose={() => setGenerating(null)} />}
      {deleting && (
        <Dialog
          open
          title={`Delete ${deleting.name}?`}
          closeLabel="Cancel"
          focusClose
          onClose={() => setDeleting(null)}
          actions={
            <Button variant="danger" onClick={() => void remove(deleting)}>
              Delete
            </Button>
          }
        >
          <p>
            {kind === 'products'
              ? 'The product and its stored image are deleted; images generated with it stay in the gallery.'
              : kind === 'scenes'
                ? 'The scene is deleted; its reference images stay in the gallery.'
                : 'It is deleted; images generated with it stay in the gallery.'}
          </p>
          <ErrorBanner problem={deleteProblem} />
        </Dialog>
      )}
    </>
  );
}

function singular(kind: Kind): string {
  return { characters: 'character', products: 'product', scenes: 'scene', 'style-presets': 'style preset' }[kind];
}

/** One page of a kind's list: its rows, the cursor of the next page (none on the last) and the list's total. */
interface RowPage {
  rows: Row[];
  next?: string;
  total: number;
}

const ASSET_PAGE = 100;

/** An asset list's answer as a page of rows (each item made a row by `row`), or the problem. */
function pageOf<T>(
  r: { data?: { data: T[]; pagination: { nextCursor?: string | null; total: number } }; error?: unknown; response: Response },
  row: (item: T) => Row,
): { value?: RowPage; problem?: Problem } {
  const d = r.data;
  return {
    problem: problem(r),
    value: d && { rows: d.data.map(row), next: d.pagination.nextCursor ?? undefined, total: d.pagination.total },
  };
}

/** A page of `kind` matching `search` (the API's search), the first or the one after `cursor`. */
async function loadRows(kind: Kind, search: string, cursor?: string): Promise<{ value?: RowPage; problem?: Problem }> {
  const q = search || undefined;
  if (kind === 'characters') {
    const r = await api.GET('/api/characters', { params: { query: { limit: ASSET_PAGE, search: q, sort_by: 'recent', cursor } } });
    return pageOf(r, (c: CharacterItem) => ({
      id: c.id,
      name: c.character_name,
      summary: c.description ?? c.base_prompt,
      thumbnail: c.thumbnail_url,
      used: c.times_used,
    }));
  }
  if (kind === 'products') {
    const r = await api.GET('/api/products', { params: { query: { page_size: ASSET_PAGE, search: q, cursor } } });
    return pageOf(r, (p: ProductItem) => ({
      id: p.id,
      name: p.productName,
      summary: p.productDescription ?? p.productUrl,
      thumbnail: p.thumbnailUrl,
      used: p.timesUsed,
    }));
  }
  if (kind === 'scenes') {
    const r = await api.GET('/api/scenes', { params: { query: { limit: ASSET_PAGE, search: q, sort_by: 'recent', cursor } } });
    return pageOf(r, (s: SceneItem) => ({
      id: s.id,
      name: s.sceneName,
      summary: s.description ?? s.scenePrompt ?? `${s.imageCount} reference image(s)`,
      thumbnail: s.thumbnailUrl,
      used: s.timesUsed,
    }));
  }
  const r = await api.GET('/api/style-presets', { params: { query: { limit: ASSET_PAGE, search: q, cursor } } });
  return pageOf(r, (s: StylePreset) => ({
    id: s.id,
    name: s.name,
    summary: s.prompt ?? s.system_instruction ?? '',
    thumbnail: null,
    used: null,
  }));
}

function deleteAsset(kind: Kind, id: number) {
  const identifier = String(id);
  if (kind === 'characters') return api.DELETE('/api/characters/{identifier}', { params: { path: { identifier } } });
  if (kind === 'products') return api.DELETE('/api/products/{identifier}', { params: { path: { identifier } } });
  if (kind === 'scenes') return api.DELETE('/api/scenes/{identifier}', { params: { path: { identifier } } });
  return api.DELETE('/api/style-presets/{id}', { params: { path: { id: String(id) } } });
}

/** The form's values: every kind's fields as text (empty = not set), and the picked reference images. */
interface Form {
  name: string;
  description: string;
  prompt: string;
  negative: string;
  system: string;
  aspect: string;
  tags: string;
  url: string;
  images: PickedImage[];
}
const EMPTY: Form = { name: '', description: '', prompt: '', negative: '', system: '', aspect: '', tags: '', url: '', images: [] };
const orNull = (s: string) => (s.trim() === '' ? null : s);
const tagList = (s: string) =>
  s
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);

/** Loads one asset into the form (characters and scenes answer their reference images here). */
async function loadForm(kind: Kind, id: number): Promise<{ value?: Form; problem?: Problem }> {
  const identifier = String(id);
  if (kind === 'characters') {
    const r = await api.GET('/api/characters/{identifier}', { params: { path: { identifier } } });
    const c = r.data?.data;
    return {
      problem: problem(r),
      value: c && {
        ...EMPTY,
        name: c.character_name,
        description: c.description ?? '',
        prompt: c.base_prompt,
        negative: c.negative_prompt ?? '',
        system: c.system_instruction ?? '',
        aspect: c.preferred_aspect_ratio ?? '',
        tags: c.tags.join(', '),
        images: c.reference_images.map((i) => ({ id: i.id, thumbnailUrl: i.thumbnail_url })),
      },
    };
  }
  if (kind === 'products') {
    const r = await api.GET('/api/products/{identifier}', { params: { path: { identifier } } });
    const p = r.data?.data;
    return {
      problem: problem(r),
      value: p && { ...EMPTY, name: p.productName, description: p.productDescription ?? '', tags: p.tags, url: p.productUrl },
    };
  }
  if (kind === 'scenes') {
    const r = await api.GET('/api/scenes/{identifier}', { params: { path: { identifier } } });
    const s = r.data?.data;
    return {
      problem: problem(r),
      value: s && {
        ...EMPTY,
        name: s.sceneName,
        description: s.description ?? '',
        prompt: s.scenePrompt ?? '',
        aspect: s.preferredAspectRatio ?? '',
        tags: s.tags.join(', '),
        images: s.referenceImages.map((i) => ({ id: i.id, thumbnailUrl: i.thumbnailUrl })),
      },
    };
  }
  const r = await api.GET('/api/style-presets/{id}', { params: { path: { id: String(id) } } });
  const s = r.data?.data;
  return {
    problem: problem(r),
    value: s && {
      ...EMPTY,
      name: s.name,
      prompt: s.prompt ?? '',
      negative: s.negative_prompt ?? '',
      system: s.system_instruction ?? '',
      aspect: s.aspect_ratio ?? '',
    },
  };
}

/** Creates (id undefined) or updates an asset from the form. */
async function saveForm(kind: Kind, id: number | undefined, f: Form): Promise<{ error?: unknown; response: Response }> {
  const aspect = (f.aspect || null) as never;
  if (kind === 'characters') {
    const body = {
      character_name: f.name,
      base_prompt: f.prompt,
      description: orNull(f.description),
      negative_prompt: orNull(f.negative),
      system_instruction: orNull(f.system),
      preferred_aspect_ratio: aspect,
      tags: tagList(f.tags),
      reference_image_ids: f.images.map((i) => i.id),
    };
    return id === undefined
      ? api.POST('/api/characters', { body })
      : api.PATCH('/api/characters/{identifier}', { params: { path: { identifier: String(id) } }, body });
  }
  if (kind === 'products') {
    return id === undefined
      ? api.POST('/api/products', {
          body: { product_name: f.name, product_url: f.url, product_description: orNull(f.description), tags: orNull(f.tags) },
        })
      : api.PATCH('/api/products/{identifier}', {
          params: { path: { identifier: String(id) } },
          body: { product_name: f.name, product_description: orNull(f.description), tags: orNull(f.tags) },
        });
  }
  if (kind === 'scenes') {
    const common = {
      description: orNull(f.description),
      scene_prompt: orNull(f.prompt),
      preferred_aspect_ratio: aspect,
      tags: tagList(f.tags),
      reference_image_ids: f.images.map((i) => i.id),
    };
    return id === undefined
      ? api.POST('/api/scenes', { body: { scene_name: f.name, ...common } })
      : api.PATCH('/api/scenes/{identifier}', {
          params: { path: { identifier: String(id) } },
          body: { new_scene_name: f.name, ...common },
        });
  }
  const common = {
    prompt: orNull(f.prompt),
    negative_prompt: orNull(f.negative),
    system_instruction: orNull(f.system),
    aspect_ratio: aspect,
  };
  return id === undefined
    ? api.POST('/api/style-presets', { body: { name: f.name, ...common } })
    : api.PATCH('/api/style-presets/{id}', { params: { path: { id: String(id) } }, body: { new_name: f.name, ...common } });
}

/** The field of the API's error details ("base_prompt ...", "Base prompt must ...") shown next to each input. */
function fieldError(p: Problem | undefined, ...names: string[]): string | undefined {
  if (!p) return undefined;
  for (const n of names) if (p.fields[n]) return p.fields[n];
  const words = names.map((n) => n.replace(/_/g, ' ').toLowerCase());
  return [p.title, ...p.details].find((d) => words.some((w) => d.toLowerCase().startsWith(w)));
}

function Editor(props: { kind: Kind; id?: number; onClose: () => void; onSaved: () => void }) {
  const { kind, id } = props;
  const [form, setForm] = useState<Form | null>(id === undefined ? EMPTY : null);
  const [busy, setBusy] = useState(false);
  const [p, setP] = useState<Problem>();
  const loaded = useLoad(async () => {
    if (id === undefined) return { value: EMPTY };
    const r = await loadForm(kind, id);
    if (r.value) setForm(r.value);
    return r;
  }, [kind, id]);
  const set = (k: keyof Form) => (v: string) => form && setForm({ ...form, [k]: v });

  async function save(e: Event) {
    e.preventDefault();
    if (!form) return;
    setBusy(true);
    const r = await saveForm(kind, id, form);
    setBusy(false);
    const failed = problem(r);
    setP(failed);
    if (failed) return;
    toast(id === undefined ? `Created ${form.name}` : `Saved ${form.name}`);
    props.onSaved();
  }

  const title = `${id === undefined ? 'New' : 'Edit'} ${singular(kind)}`;
  const formId = `asset-form-${kind}`;
  return (
    <Dialog
      open
      title={title}
      onClose={props.onClose}
      actions={
        <Button variant="primary" type="submit" form={formId} busy={busy} disabled={!form}>
          {id === undefined ? 'Create' : 'Save'}
        </Button>
      }
    >
      <ErrorBanner problem={loaded.problem} />
      {form && (
        <form id={formId} onSubmit={save} class="asset-form">
          <Field
            label="Name"
            value={form.name}
            onInput={set('name')}
            required
            max={kind === 'style-presets' ? 100 : 255}
            error={fieldError(p, 'character_name', 'product_name', 'scene_name', 'new_scene_name', 'name', 'new_name')}
          />
          {kind === 'products' && (
            <Field
              label="Product image URL"
              type="url"
              value={form.url}
              onInput={set('url')}
              required={id === undefined}
              hint={id === undefined ? 'A public image URL; the image is fetched and stored.' : 'The image of a product cannot change.'}
              error={fieldError(p, 'product_url', 'Invalid product URL', 'url')}
            />
          )}
          {kind === 'characters' && (
            <Field
              label="Base prompt"
              value={form.prompt}
              onInput={set('prompt')}
              multiline
              required
              max={2000}
              hint="10–2000 characters: how the character looks."
              error={fieldError(p, 'base_prompt')}
            />
          )}
          {kind === 'scenes' && (
            <Field
              label="Scene prompt"
              value={form.prompt}
              onInput={set('prompt')}
              multiline
              max={2000}
              error={fieldError(p, 'scene_prompt')}
            />
          )}
          {kind === 'style-presets' && (
            <Field label="Prompt" value={form.prompt} onInput={set('prompt')} multiline max={2000} error={fieldError(p, 'prompt')} />
          )}
          {kind !== 'style-presets' && (
            <Field
              label="Description"
              value={form.description}
              onInput={set('description')}
              multiline
              rows={2}
              max={1000}
              error={fieldError(p, 'description', 'product_description')}
            />
          )}
          {(kind === 'characters' || kind === 'style-presets') && (
            <>
              <Field
                label="Negative prompt"
                value={form.negative}
                onInput={set('negative')}
                multiline
                rows={2}
                max={2000}
                error={fieldError(p, 'negative_prompt')}
              />
              <Field
                label="System instruction"
                value={form.system}
                onInput={set('system')}
                multiline
                rows={2}
                max={2000}
                error={fieldError(p, 'system_instruction')}
              />
            </>
          )}
          {kind !== 'products' && (
            <AspectSelect
              value={form.aspect}
              onInput={set('aspect')}
              error={fieldError(p, 'preferred_aspect_ratio', 'aspect_ratio', 'Invalid aspect ratio')}
            />
          )}
          {kind !== 'style-presets' && (
            <Field label="Tags" value={form.tags} onInput={set('tags')} hint="Comma-separated." error={fieldError(p, 'tags')} />
          )}
          {(kind === 'characters' || kind === 'scenes') && (
            <ImagePicker
              label="Reference images"
              max={kind === 'characters' ? 10 : 20}
              value={form.images}
              onChange={(images) => setForm({ ...form, images })}
            />
          )}
          {kind !== 'products' && fieldError(p, 'reference_image_ids', 'invalid_ids') && (
            <p class="field-error" role="alert">
              {fieldError(p, 'reference_image_ids', 'invalid_ids')}
            </p>
          )}
          <ErrorBanner problem={p} />
        </form>
      )}
    </Dialog>
  );
}

function AspectSelect(props: { value: string; onInput: (v: string) => void; error?: string; options?: readonly string[]; label?: string }) {
  const id = `aspect-${props.label ?? 'preferred'}`.replace(/\W/g, '-');
  return (
    <div class={`field${props.error ? ' field-invalid' : ''}`}>
      <label for={id}>{props.label ?? 'Preferred aspect ratio'}</label>
      <select
        id={id}
        value={props.value}
        onChange={(e) => props.onInput(e.currentTarget.value)}
        aria-invalid={props.error ? true : undefined}
      >
        <option value="">{props.options ? 'Default' : 'None'}</option>
        {(props.options ?? ASPECT_RATIOS).map((r) => (
          <option key={r} value={r}>
            {r}
          </option>
        ))}
      </select>
      {props.error && (
        <p class="field-error" role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

interface Generated {
  imageId: number;
  fullUrl: string;
  thumbnailUrl: string;
  width: number;
  height: number;
}

/** Generates from a character or a product and shows the result in place. */
function Generate(props: { kind: 'characters' | 'products'; row: Row; onClose: () => void }) {
  const { kind, row } = props;
  const [scene, setScene] = useState('');
  const [details, setDetails] = useState('');
  const [aspect, setAspect] = useState('');
  const [n, setN] = useState('1');
  const [busy, setBusy] = useState(false);
  const [p, setP] = useState<Problem>();
  const [result, setResult] = useState<Generated[]>([]);

  async function run(e: Event) {
    e.preventDefault();
    setBusy(true);
    setP(undefined);
    const identifier = String(row.id);
    let images: Generated[] = [];
    if (kind === 'characters') {
      const r = await api.POST('/api/characters/{identifier}/generate', {
        params: { path: { identifier } },
        body: { scene_prompt: scene, additional_details: orNull(details), ...(aspect ? { aspect_ratio: aspect } : {}) },
      });
      setP(problem(r));
      const d = r.data?.data;
      if (d && 'imageId' in d)
        images = [{ imageId: d.imageId, fullUrl: d.fullUrl, thumbnailUrl: d.thumbnailUrl, width: d.width, height: d.height }];
    } else {
      const r = await api.POST('/api/products/{identifier}/generate', {
        params: { path: { identifier } },
        body: {
          scene_prompt: scene,
          additional_details: orNull(details),
          number_of_images: Number(n),
          ...(aspect ? { aspect_ratio: aspect as '1:1' } : {}),
        },
      });
      setP(problem(r));
      const d = r.data?.data;
      // Every image of the request (number_of_images), each of the first one's size.
      if (d && 'images' in d) {
        images = d.images.map((im) => ({
          imageId: im.id,
          fullUrl: im.url,
          thumbnailUrl: im.thumbnail_url,
          width: d.width,
          height: d.height,
        }));
      }
    }
    setBusy(false);
    if (images.length) {
      setResult([...images, ...result]);
      toast(`Generated image ${images.map((i) => i.imageId).join(', ')}`);
    }
  }

  return (
    <Dialog
      open
      title={`Generate from ${row.name}`}
      onClose={props.onClose}
      actions={
        <Button variant="primary" type="submit" form="asset-generate" busy={busy}>
          {busy ? 'Generating…' : 'Generate'}
        </Button>
      }
    >
      <form id="asset-generate" onSubmit={run}>
        <Field
          label="Scene"
          value={scene}
          onInput={setScene}
          multiline
          rows={3}
          required
          max={1500}
          hint={kind === 'characters' ? '5–1500 characters: where the character is and what it does.' : 'Where the product is shown.'}
          error={fieldError(p, 'scene_prompt', 'Scene prompt')}
        />
        <Field label="Additional details" value={details} onInput={setDetails} max={1000} error={fieldError(p, 'additional_details')} />
        <AspectSelect
          label="Aspect ratio"
          value={aspect}
          onInput={setAspect}
          options={kind === 'products' ? PRODUCT_RATIOS : ASPECT_RATIOS}
          error={fieldError(p, 'aspect_ratio')}
        />
        {kind === 'products' && (
          <Field label="Number of images" type="number" value={n} onInput={setN} hint="1–4" error={fieldError(p, 'number_of_images')} />
        )}
        <ErrorBanner problem={p} />
      </form>
      {busy && (
        <p role="status" class="muted">
          Generating… this takes a few seconds.
        </p>
      )}
      {result.length > 0 && (
        <section aria-label="Generated images">
          <h3>Result</h3>
          <ul class="thumbs">
            {result.map((im) => (
              <li key={im.imageId}>
                <Link href={`/images/${im.imageId}`} aria-label={`Image ${im.imageId} in the gallery`}>
                  <img
                    src={im.thumbnailUrl}
                    alt={`Generated #${im.imageId}`}
                    width={160}
                    height={Math.round((160 * im.height) / Math.max(1, im.width))}
                    loading="lazy"
                  />
                </Link>
              </li>
            ))}
          </ul>
        </section>
      )}
    </Dialog>
  );
}
