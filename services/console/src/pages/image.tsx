/**
 * An image (issue 38 item 3): the full image, every field of its detail, the edit history as a chain (its
 * ancestors up to the original, then its edits, each a link), edit with a prompt (the result linked), delete
 * (after a confirmation) and download (a link to the stored file).
 */
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { api, type Problem, problem } from '../api';
import { formatBytes, formatTime } from '../components/api-types';
import { Button, Dialog, ErrorBanner, Field, toast, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, navigate } from '../router';
import './gallery.css';

/** SPEC 4.1: the longest edit prompt (libs/api-schemas PROMPT_MAX.provB). */
const EDIT_PROMPT_MAX = 32000;

interface ChainEntry {
  id: number;
  operation: string;
  prompt: string;
  thumbnailUrl: string;
}

function Chain({ title, entries, empty }: { title: string; entries: ChainEntry[]; empty: string }) {
  const hid = `chain-${title.toLowerCase().replace(/\W+/g, '-')}`;
  return (
    <section aria-labelledby={hid}>
      <h2 id={hid}>{title}</h2>
      {entries.length === 0 ? (
        <p>{empty}</p>
      ) : (
        <ol class="chain">
          {entries.map((e) => (
            <li key={e.id}>
              <Link href={`/images/${e.id}`} aria-label={`Image ${e.id} (${e.operation}): ${e.prompt.slice(0, 60)}`}>
                <img src={e.thumbnailUrl} alt="" width={120} height={120} loading="lazy" />
              </Link>
              <span>
                #{e.id} · {e.operation}
              </span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

export default function ImagePage({ params }: PageProps) {
  const id = Number(params.id);
  usePageTitle(`Image ${params.id}`);
  const detail = useLoad(async () => {
    if (!Number.isInteger(id) || id < 1) return { problem: { status: 404, title: 'There is no such image.', details: [], fields: {} } };
    const r = await api.GET('/api/images/{id}', { params: { path: { id } } });
    return { value: r.data?.data, problem: problem(r) };
  }, [id]);
  const [confirm, setConfirm] = useState(false);
  const [delProblem, setDelProblem] = useState<Problem>();
  const [deleting, setDeleting] = useState(false);
  const [prompt, setPrompt] = useState('');
  const [editing, setEditing] = useState(false);
  const [editProblem, setEditProblem] = useState<Problem>();
  const [edited, setEdited] = useState<{ id: number; thumbnailUrl: string; width: number; height: number }>();

  const im = detail.value;
  const fields: [string, string | number][] = im
    ? [
        ['Id', im.id],
        ['Prompt', im.prompt],
        ['Negative prompt', im.negativePrompt ?? '—'],
        ['Operation', im.operation],
        ['Model', im.modelId],
        ['Aspect ratio', im.aspectRatio],
        ['Resolution tier', im.resolutionTier ?? '—'],
        ['Size', `${im.width} × ${im.height} px, ${formatBytes(im.sizeBytes)}`],
        ['Format', `${im.format} (${im.mimeType})`],
        ['Session', im.sessionId],
        ['Style preset', im.stylePresetId ?? '—'],
        ['Product', im.productReferenceId ?? '—'],
        ['Reference groups', im.referenceGroupIds?.join(', ') || '—'],
        ['Parent image', im.parent_image_id ?? '—'],
        ['Reference image', im.isReference ? 'yes' : 'no'],
        ['Created', formatTime(im.createdAt)],
      ]
    : [];

  async function remove() {
    setDeleting(true);
    const r = await api.DELETE('/api/images/{id}', { params: { path: { id } } });
    setDeleting(false);
    const p = problem(r);
    setDelProblem(p);
    if (!p) {
      setConfirm(false);
      toast(`Image ${id} deleted`);
      navigate('/gallery');
    }
  }

  async function edit(e: Event) {
    e.preventDefault();
    setEditing(true);
    const r = await api.POST('/api/edit-image', { body: { image_id: id, prompt } });
    setEditing(false);
    const p = problem(r);
    setEditProblem(p);
    if (r.data && 'recordId' in r.data) {
      setEdited({ id: r.data.recordId, thumbnailUrl: r.data.thumbnailUrl, width: r.data.width, height: r.data.height });
      setPrompt('');
      toast(`Edit saved as image ${r.data.recordId}`);
      detail.reload();
    }
  }

  return (
    <>
      <h1>Image {params.id}</h1>
      <p>
        <Link href="/gallery">Back to the gallery</Link>
      </p>
      <ErrorBanner problem={detail.problem} />
      {detail.loading && !im && <p>Loading…</p>}
      {im && (
        <>
          <div class="image-layout">
            <img class="image-full" src={im.fullUrl} alt={im.prompt.slice(0, 200)} width={im.width} height={im.height} />
            <dl class="image-fields">
              {fields.map(([k, v]) => (
                <Fragment key={k}>
                  <dt>{k}</dt>
                  <dd>
                    {k === 'Parent image' && im.parent_image_id ? <Link href={`/images/${im.parent_image_id}`}>#{v}</Link> : String(v)}
                  </dd>
                </Fragment>
              ))}
            </dl>
          </div>
          <div class="row">
            <a class="btn" href={im.fullUrl} download={`image-${im.id}.${im.format}`}>
              Download
            </a>
            <Button variant="danger" onClick={() => setConfirm(true)}>
              Delete
            </Button>
          </div>
          <Chain title="Edited from" entries={im.editHistory.ancestors} empty="This is an original image." />
          <Chain title="Edits of this image" entries={im.editHistory.edits} empty="No edits yet." />
          <section aria-labelledby="edit-h">
            <h2 id="edit-h">Edit with a prompt</h2>
            <form onSubmit={edit}>
              <Field
                label="Edit prompt"
                value={prompt}
                onInput={setPrompt}
                max={EDIT_PROMPT_MAX}
                error={editProblem?.fields.prompt}
                multiline
                rows={3}
              />
              <Button type="submit" variant="primary" busy={editing} disabled={!prompt.trim() || prompt.length > EDIT_PROMPT_MAX}>
                Edit image
              </Button>
              <ErrorBanner problem={editProblem} />
            </form>
            {edited && (
              <p>
                Result:{' '}
                <Link href={`/images/${edited.id}`} aria-label={`Open the edited image ${edited.id}`}>
                  image {edited.id}
                </Link>
              </p>
            )}
          </section>
        </>
      )}
      <Dialog
        open={confirm}
        title={`Delete image ${params.id}?`}
        closeLabel="Cancel"
        focusClose
        onClose={() => setConfirm(false)}
        actions={
          <Button variant="danger" busy={deleting} onClick={remove}>
            Delete for good
          </Button>
        }
      >
        <p>The image and its files are deleted. Its edits stay (they keep the link to it).</p>
        <ErrorBanner problem={delProblem} />
      </Dialog>
    </>
  );
}
