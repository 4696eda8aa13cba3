/**
 * The studio's form controls (issue 38 item 4): labelled selects and checkboxes, and the pickers of the tenant's
 * saved assets, which list the first page and reach the rest through the API (its search, or the next page).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, networkProblem, type Problem, problem } from '../api';
import type { CharacterItem, ProductItem, SceneItem, StylePreset } from '../components/api-types';
import { Button, Check } from '../components/ui';

/** One page of a picker: what the API listed, and whether the tenant has more. */
export interface AssetPage {
  items: Named[];
  more: boolean;
}

/** A picker's page as the API answered it, or the problem. */
export type Listed = { value?: AssetPage; problem?: Problem };

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
  page: (offset: number) => Promise<Listed>;
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
    const r = await props.page(loaded.length).catch((err): Listed => ({ problem: networkProblem(err) }));
    setBusy(false);
    setFailed(r.problem?.title);
    const next = r.value;
    if (!next) return;
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

/** How many a picker lists at a time. */
const PICKER_PAGE = 100;

/** A picker's page from an asset list's answer: its items named by `name`, `more` as the list says. */
function listed<T extends { id: number }>(
  r: { data?: { data: T[] }; error?: unknown; response: Response },
  name: (item: T) => string,
  more: (items: number) => boolean,
): Listed {
  const items = r.data?.data.map((x) => ({ id: x.id, name: name(x) }));
  return { problem: problem(r), value: items && { items, more: more(items.length) } };
}

/** The tenant's style presets by name: a page from `offset`, or the matches of `search`. */
export async function listStylePresets(query: { offset?: number; search?: string } = {}): Promise<Listed> {
  const r = await api.GET('/api/style-presets', { params: { query: { limit: PICKER_PAGE, ...query } } });
  return listed(
    r,
    (x: StylePreset) => x.name,
    (n) => (query.offset ?? 0) + n < (r.data?.pagination.total ?? 0),
  );
}
/** The tenant's scenes, most recently used first. */
export async function listScenes(query: { offset?: number; search?: string } = {}): Promise<Listed> {
  const r = await api.GET('/api/scenes', { params: { query: { limit: PICKER_PAGE, sort_by: 'recent', ...query } } });
  return listed(
    r,
    (x: SceneItem) => x.sceneName,
    () => Boolean(r.data?.pagination.hasMore),
  );
}
/** The tenant's characters, most recently used first. */
export async function listCharacters(query: { search?: string } = {}): Promise<Listed> {
  const r = await api.GET('/api/characters', { params: { query: { limit: PICKER_PAGE, sort_by: 'recent', ...query } } });
  return listed(
    r,
    (x: CharacterItem) => x.character_name,
    () => Boolean(r.data?.pagination.hasMore),
  );
}
/** The tenant's products, newest first. */
export async function listProducts(query: { search?: string } = {}): Promise<Listed> {
  const r = await api.GET('/api/products', { params: { query: { page_size: PICKER_PAGE, ...query } } });
  return listed(
    r,
    (x: ProductItem) => x.productName,
    () => Boolean(r.data?.pagination.hasMore),
  );
}

/** The next page of a select, and the matches of a Find box, through the same lists. */
export const stylePresetPage = (offset: number) => listStylePresets({ offset });
export const scenePage = (offset: number) => listScenes({ offset });
const matches = (list: (query: { search: string }) => Promise<Listed>) => async (search: string) =>
  (await list({ search })).value?.items ?? [];
export const findStylePresets = matches(listStylePresets);
export const findScenes = matches(listScenes);
export const findCharacters = matches(listCharacters);
export const findProducts = matches(listProducts);
