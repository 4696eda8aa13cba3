/** The gallery's selection: bulk delete (confirmed first, each failure shown) and the ZIP download. */
import { useState } from 'preact/hooks';
import { MAX_BULK_DELETE, MAX_DOWNLOAD_IDS } from '../../../../libs/api-schemas/src/vocab';
import { api, networkProblem, type Problem, problem } from '../api';
import type { BulkDeleteResult } from '../components/api-types';
import { Button, ErrorBanner, useConfirm } from '../components/ui';

/** Saves a Blob under `name` (an object URL and an <a download>; the URL is released once the download started). */
function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** What a bulk delete did: how many went, and each failed image's id and reason. */
export function DeleteOutcome({ result, onDismiss }: { result: BulkDeleteResult; onDismiss: () => void }) {
  const { summary, failed } = result;
  const said = `Deleted ${summary.succeeded} of ${summary.total} image${summary.total === 1 ? '' : 's'}.`;
  return (
    <div class={`banner ${failed.length ? 'banner-error' : 'banner-ok'}`} role={failed.length ? 'alert' : 'status'}>
      <p>
        <strong>{said}</strong>
        {failed.length > 0 && ` ${failed.length} could not be deleted (still selected):`}
      </p>
      {failed.length > 0 && (
        <ul class="banner-list" aria-label="Images not deleted">
          {failed.map((f) => (
            <li key={f.id}>
              Image {f.id}: {f.error}
            </li>
          ))}
        </ul>
      )}
      <button type="button" class="btn btn-quiet" onClick={onDismiss}>
        Dismiss
      </button>
    </div>
  );
}

/** The selection's toolbar: count, select all shown / clear, bulk delete (confirmed first) and the ZIP download. */
export function SelectionBar(props: {
  selected: number[];
  shown: number;
  onSelectAll: () => void;
  onClear: () => void;
  onDeleted: (r: BulkDeleteResult) => void;
}) {
  const n = props.selected.length;
  const [deleting, setDeleting] = useState(false);
  const [zipping, setZipping] = useState(false);
  const [prob, setProb] = useState<Problem>();
  const confirm = useConfirm();
  const tooManyToDelete = n > MAX_BULK_DELETE;
  const tooManyToZip = n > MAX_DOWNLOAD_IDS;

  const bulkDelete = async () => {
    const ids = props.selected;
    const sure = await confirm.ask({
      title: `Delete ${ids.length} image${ids.length === 1 ? '' : 's'}?`,
      body: <p>The selected images and their files are deleted. Edits made from them stay (they keep the link).</p>,
      confirmLabel: `Delete ${ids.length}`,
    });
    if (!sure) return;
    setDeleting(true);
    try {
      const r = await api.POST('/api/images/delete-bulk', { body: { ids } });
      setProb(problem(r));
      if (r.data) props.onDeleted(r.data.data);
    } catch (err) {
      setProb(networkProblem(err));
    } finally {
      setDeleting(false);
    }
  };
  const download = async () => {
    setZipping(true);
    try {
      const r = await api.POST('/api/images/download', { body: { imageIds: props.selected }, parseAs: 'blob' });
      const p = problem(r);
      setProb(p);
      if (!p && r.data) saveBlob(r.data as Blob, 'images.zip');
    } catch (err) {
      setProb(networkProblem(err));
    } finally {
      setZipping(false);
    }
  };

  return (
    <section class="selection-bar" aria-label="Selection">
      {confirm.dialog}
      <p class="selection-count" aria-live="polite">
        {n === 0 ? 'No image selected' : `${n} selected`}
      </p>
      <div class="row">
        <Button onClick={props.onSelectAll} disabled={props.shown === 0}>
          Select all shown
        </Button>
        <Button onClick={props.onClear} disabled={n === 0}>
          Clear selection
        </Button>
        <Button
          variant="danger"
          busy={deleting}
          disabled={n === 0 || tooManyToDelete}
          aria-describedby={tooManyToDelete ? 'too-many-to-delete' : undefined}
          onClick={() => void bulkDelete()}
        >
          Delete selected
        </Button>
        <Button
          busy={zipping}
          disabled={n === 0 || tooManyToZip}
          aria-describedby={tooManyToZip ? 'too-many-to-zip' : undefined}
          onClick={() => void download()}
        >
          Download ZIP
        </Button>
      </div>
      {tooManyToDelete && (
        <p id="too-many-to-delete" class="selection-note">
          Delete takes at most {MAX_BULK_DELETE} images at a time: {n} are selected. Clear some to delete them.
        </p>
      )}
      {tooManyToZip && (
        <p id="too-many-to-zip" class="selection-note">
          A ZIP holds at most {MAX_DOWNLOAD_IDS} images: {n} are selected.
        </p>
      )}
      <ErrorBanner problem={prob} onDismiss={() => setProb(undefined)} />
    </section>
  );
}
