/**
 * The studio's form controls (issue 38 item 4): labelled selects and checkboxes, and the pickers of the tenant's
 * saved assets, which list the first page and reach the rest through the API (its search, or the next page).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import type { CharacterItem, ProductItem, SceneItem, StylePreset } from '../components/api-types';
import { Button } from '../components/ui';

/** One page of a picker: what the API listed from `offset`, and whether it has more. */
export interface AssetPage {
  items: Named[];
  more: boolean;
  /** Said next to the picker when the page could not be read. */
  error?: string;
}

export function Select(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  options: readonly (string | readonly [string, string])[];
  error?: string;
  hint?: string;
}) {
  const id = `studio-${props.label.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <div class={`field${props.error ? ' field-invalid' : ''}`}>
      <label for={id}>{props.label}</label>
      <select
        id={id}
        value={props.value}
        onChange={(e) => props.onInput(e.currentTarget.value)}
        aria-invalid={props.error ? true : undefined}
        aria-describedby={props.error ? `${id}-err` : props.hint ? `${id}-hint` : undefined}
      >
        {props.options.map((o) => {
          const [value, text] = typeof o === 'string' ? [o, o] : o;
          return (
            <option key={value} value={value}>
              {text}
            </option>
          );
        })}
      </select>
      {props.hint && (
        <div class="field-meta">
          <span id={`${id}-hint`}>{props.hint}</span>
        </div>
      )}
      {props.error && (
        <p id={`${id}-err`} class="field-error" role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

export function Check(props: { label: string; checked: boolean; onChange: (on: boolean) => void; disabled?: boolean }) {
  return (
    <label class="check">
      <input type="checkbox" checked={props.checked} disabled={props.disabled} onChange={(e) => props.onChange(e.currentTarget.checked)} />{' '}
      {props.label}
    </label>
  );
}

/** A saved asset as the studio lists it. */
export type Named = { id: number; name: string };

/** Above this many (or when the tenant has more than the first page), the list gets a search box. */
const FIND_ABOVE = 10;

/** What a search typed in a Find box waits for before it asks the API (a request per pause, not per key). */
const FIND_DELAY_MS = 250;

/** The matches of `term` through `find` (the API's search), undefined while the term is empty; the last asked wins. */
function useFound(term: string, find?: (term: string) => Promise<Named[]>): Named[] | undefined {
  const [found, setFound] = useState<Named[]>();
  const seq = useRef(0);
  useEffect(() => {
    const mine = ++seq.current;
    if (!term.trim() || !find) {
      setFound(undefined);
      return;
    }
    const t = setTimeout(() => {
      find(term.trim()).then((r) => mine === seq.current && setFound(r));
    }, FIND_DELAY_MS);
    return () => clearTimeout(t);
  }, [term]);
  return found;
}

/**
 * Checkboxes of the tenant's characters or products (at most `max` chosen). The first page (100) is listed; with
 * more than FIND_ABOVE, or more than that page, "Find" searches them all through the API (its `search`), the chosen
 * ones staying listed.
 */
export function AssetChecks(props: {
  legend: string;
  items: Named[];
  /** The tenant has more than `items`. */
  more: boolean;
  find: (term: string) => Promise<Named[]>;
  chosen: number[];
  max: number;
  onChange: (ids: number[]) => void;
  error?: string;
}) {
  const [term, setTerm] = useState('');
  const found = useFound(term, props.find);
  const [known, setKnown] = useState<Map<number, Named>>(new Map());
  if (props.items.length === 0) return null;
  const full = props.chosen.length >= props.max;
  const shown = found ?? props.items;
  // The chosen ones stay in view whatever the search shows.
  const chosenHidden = props.chosen
    .filter((id) => !shown.some((x) => x.id === id))
    .map((id) => known.get(id) ?? props.items.find((x) => x.id === id) ?? { id, name: `#${id}` });
  const toggle = (it: Named, v: boolean) => {
    if (v) setKnown((m) => new Map(m).set(it.id, it));
    props.onChange(v ? [...props.chosen, it.id] : props.chosen.filter((x) => x !== it.id));
  };
  const searchId = `find-${props.legend.toLowerCase()}`;
  return (
    <fieldset class="studio-assets">
      <legend>
        {props.legend} (at most {props.max})
      </legend>
      {(props.more || props.items.length > FIND_ABOVE) && (
        <div class="field">
          <label for={searchId}>Find {props.legend.toLowerCase()}</label>
          <input id={searchId} type="search" value={term} onInput={(e) => setTerm(e.currentTarget.value)} />
        </div>
      )}
      {[...chosenHidden, ...shown].map((it) => {
        const on = props.chosen.includes(it.id);
        return <Check key={it.id} label={it.name} checked={on} disabled={!on && full} onChange={(v) => toggle(it, v)} />;
      })}
      {found && found.length === 0 && (
        <p class="muted">
          No {props.legend.toLowerCase()} match “{term}”.
        </p>
      )}
      {props.error && (
        <p class="field-error" role="alert">
          {props.error}
        </p>
      )}
    </fieldset>
  );
}

export const findCharacters = async (search: string): Promise<Named[]> => {
  const r = await api.GET('/api/characters', { params: { query: { limit: 100, search, sort_by: 'recent' } } });
  return (r.data?.data ?? []).map((x: CharacterItem) => ({ id: x.id, name: x.character_name }));
};
export const findProducts = async (search: string): Promise<Named[]> => {
  const r = await api.GET('/api/products', { params: { query: { page_size: 100, search } } });
  return (r.data?.data ?? []).map((x: ProductItem) => ({ id: x.id, name: x.productName }));
};

/**
 * A select of the tenant's style presets or scenes (`plural` names them). The first page is listed; when the
 * tenant has more, "Show more" reads the next page into it (offset paging), and a Find box (above FIND_ABOVE, or
 * when the tenant has more) lists the matches of the API's search instead. The chosen one stays an option whatever
 * is shown.
 */
export function AssetSelect(props: {
  label: string;
  plural: string;
  value: string;
  onInput: (v: string) => void;
  first: AssetPage;
  page: (offset: number) => Promise<AssetPage>;
  find?: (term: string) => Promise<Named[]>;
  error?: string;
}) {
  const [loaded, setLoaded] = useState<Named[]>(props.first.items);
  const [more, setMore] = useState(props.first.more);
  const [busy, setBusy] = useState(false);
  const [failed, setFailed] = useState<string>();
  const [term, setTerm] = useState('');
  const found = useFound(term, props.find);
  const [known, setKnown] = useState<Map<number, Named>>(new Map());
  const showMore = async () => {
    setBusy(true);
    const next = await props
      .page(loaded.length)
      .catch((err): AssetPage => ({ items: [], more: true, error: `No answer from the server: ${(err as Error).message}` }));
    setBusy(false);
    setFailed(next.error);
    if (next.error) return;
    setLoaded((l) => [...l, ...next.items.filter((x) => !l.some((y) => y.id === x.id))]);
    setMore(next.more && next.items.length > 0);
  };
  const shown = found ?? loaded;
  const chosen = props.value ? Number(props.value) : undefined;
  const chosenHidden =
    chosen !== undefined && !shown.some((x) => x.id === chosen)
      ? [known.get(chosen) ?? loaded.find((x) => x.id === chosen) ?? { id: chosen, name: `#${chosen}` }]
      : [];
  const pick = (v: string) => {
    const it = shown.find((x) => String(x.id) === v);
    if (it) setKnown((m) => new Map(m).set(it.id, it));
    props.onInput(v);
  };
  const slug = props.plural.replace(/\W+/g, '-').toLowerCase();
  const searchable = props.find && (more || loaded.length > FIND_ABOVE);
  return (
    <div class="studio-asset-select">
      {searchable && (
        <div class="field">
          <label for={`find-${slug}`}>Find {props.plural}</label>
          <input id={`find-${slug}`} type="search" value={term} onInput={(e) => setTerm(e.currentTarget.value)} />
        </div>
      )}
      <Select
        label={props.label}
        value={props.value}
        onInput={pick}
        options={[['', 'None'], ...[...chosenHidden, ...shown].map((x) => [String(x.id), x.name] as const)]}
        error={props.error}
        hint={
          found
            ? found.length === 0
              ? `No ${props.plural} match “${term.trim()}”`
              : `${found.length} found for “${term.trim()}”`
            : undefined
        }
      />
      {more && !found && (
        <Button onClick={showMore} busy={busy}>
          Show more {props.plural} ({loaded.length} shown)
        </Button>
      )}
      {failed && (
        <p class="field-error" role="alert">
          {failed}
        </p>
      )}
    </div>
  );
}

/** A page of the tenant's style presets (by name) or scenes (most recently used first), as the studio lists them. */
export const PICKER_PAGE = 100;
export async function stylePresetPage(offset: number): Promise<AssetPage> {
  const r = await api.GET('/api/style-presets', { params: { query: { limit: PICKER_PAGE, offset } } });
  if (!r.data) return { items: [], more: false, error: `Style presets could not be listed (${r.response.status})` };
  const items = r.data.data.map((x: StylePreset) => ({ id: x.id, name: x.name }));
  return { items, more: offset + items.length < r.data.pagination.total };
}
export async function scenePage(offset: number): Promise<AssetPage> {
  const r = await api.GET('/api/scenes', { params: { query: { limit: PICKER_PAGE, offset, sort_by: 'recent' } } });
  if (!r.data) return { items: [], more: false, error: `Scenes could not be listed (${r.response.status})` };
  return { items: r.data.data.map((x: SceneItem) => ({ id: x.id, name: x.sceneName })), more: Boolean(r.data.pagination.hasMore) };
}
export const findStylePresets = async (search: string): Promise<Named[]> => {
  const r = await api.GET('/api/style-presets', { params: { query: { limit: PICKER_PAGE, search } } });
  return (r.data?.data ?? []).map((x: StylePreset) => ({ id: x.id, name: x.name }));
};
export const findScenes = async (search: string): Promise<Named[]> => {
  const r = await api.GET('/api/scenes', { params: { query: { limit: PICKER_PAGE, search, sort_by: 'recent' } } });
  return (r.data?.data ?? []).map((x: SceneItem) => ({ id: x.id, name: x.sceneName }));
};
