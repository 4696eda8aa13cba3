/**
 * Picks reference images from the tenant's gallery (GET /api/images, newest first, cursor paging): a dialog of
 * thumbnails with their known size (lazy-loaded, nothing jumps), each a checkbox, up to `max` chosen.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, problem } from '../api';
import type { Image } from './api-types';
import { Button, Dialog, ErrorBanner, Field } from './ui';

/** The chosen images as the form keeps them: id and thumbnail. */
export interface PickedImage {
  id: number;
  thumbnailUrl: string;
}

export function ImagePicker(props: { label: string; max: number; value: PickedImage[]; onChange: (v: PickedImage[]) => void }) {
  const [open, setOpen] = useState(false);
  return (
    <fieldset class="picked">
      <legend>{props.label}</legend>
      {props.value.length === 0 ? (
        <p class="muted">None chosen.</p>
      ) : (
        <ul class="thumbs thumbs-small">
          {props.value.map((im) => (
            <li key={im.id}>
              <img src={im.thumbnailUrl} alt={`#${im.id}`} width={64} height={64} loading="lazy" />
              <Button
                variant="quiet"
                aria-label={`Remove image ${im.id}`}
                onClick={() => props.onChange(props.value.filter((x) => x.id !== im.id))}
              >
                Remove
              </Button>
            </li>
          ))}
        </ul>
      )}
      <Button onClick={() => setOpen(true)}>Choose from gallery…</Button>
      {open && (
        <PickerDialog
          max={props.max}
          initial={props.value}
          onClose={() => setOpen(false)}
          onDone={(v) => {
            props.onChange(v);
            setOpen(false);
          }}
        />
      )}
    </fieldset>
  );
}

function PickerDialog(props: { max: number; initial: PickedImage[]; onClose: () => void; onDone: (v: PickedImage[]) => void }) {
  const [images, setImages] = useState<Image[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [search, setSearch] = useState('');
  const [applied, setApplied] = useState('');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<ReturnType<typeof problem>>();
  const [chosen, setChosen] = useState<PickedImage[]>(props.initial);

  async function load(more: boolean) {
    setBusy(true);
    const r = await api.GET('/api/images', {
      params: { query: { limit: 24, ...(applied ? { search: applied, searchMode: 'all' } : {}), ...(more && cursor ? { cursor } : {}) } },
    });
    setBusy(false);
    setErr(problem(r));
    if (!r.data) return;
    setImages(more ? [...images, ...r.data.data] : r.data.data);
    setCursor(r.data.pagination.nextCursor ?? null);
  }
  useEffect(() => {
    void load(false);
  }, [applied]);

  const isChosen = (id: number) => chosen.some((c) => c.id === id);
  function toggle(im: Image) {
    if (isChosen(im.id)) setChosen(chosen.filter((c) => c.id !== im.id));
    else if (chosen.length < props.max) setChosen([...chosen, { id: im.id, thumbnailUrl: im.thumbnailUrl }]);
  }

  return (
    <Dialog
      open
      title="Choose images from the gallery"
      onClose={props.onClose}
      actions={
        <Button variant="primary" onClick={() => props.onDone(chosen)}>
          Use {chosen.length} image{chosen.length === 1 ? '' : 's'}
        </Button>
      }
    >
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(search.trim());
        }}
      >
        <Field label="Search prompts" type="search" value={search} onInput={setSearch} max={500} />
        <Button type="submit">Search</Button>
      </form>
      <p class="muted" aria-live="polite">
        {chosen.length} of at most {props.max} chosen.
      </p>
      <ErrorBanner problem={err} />
      {images.length === 0 && !busy ? <p>No images in the gallery{applied ? ' match' : ' yet'}.</p> : null}
      <ul class="thumbs picker-grid">
        {images.map((im) => (
          <li key={im.id}>
            <label class={isChosen(im.id) ? 'pick chosen' : 'pick'}>
              <input
                type="checkbox"
                checked={isChosen(im.id)}
                disabled={!isChosen(im.id) && chosen.length >= props.max}
                onChange={() => toggle(im)}
              />
              <img src={im.thumbnailUrl} alt="" width={120} height={Math.round((120 * im.height) / Math.max(1, im.width))} loading="lazy" />
              <span class="pick-caption">
                #{im.id} {im.prompt.slice(0, 40)}
              </span>
            </label>
          </li>
        ))}
      </ul>
      {cursor && (
        <Button busy={busy} onClick={() => void load(true)}>
          Load more
        </Button>
      )}
    </Dialog>
  );
}
