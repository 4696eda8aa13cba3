/** The gallery's saved searches (SPEC 4.6): apply, save the current filters, delete. */
import { useState } from 'preact/hooks';
import { SEARCH_PRESET_NAME_MAX } from '../../../../libs/api-schemas/src/vocab';
import { api, networkProblem, type Problem, problem } from '../api';
import { Button, ErrorBanner, Field, toast, useConfirm, useLoad } from '../components/ui';
import { FILTERS, type FilterName, type Filters, filtersOfPreset, LABELS, PRESET_KEYS, presetFiltersOf } from './gallery-filters';

/** Saved searches (SPEC 4.6): apply one (its filters become the URL's), save the current filters, delete one. */
export function SavedSearches(props: { applied: Filters; onApply: (f: Filters) => void }) {
  const list = useLoad(async () => {
    const r = await api.GET('/api/search-presets');
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const presets = list.value ?? [];
  const [chosen, setChosen] = useState('');
  const [name, setName] = useState('');
  const [saving, setSaving] = useState(false);
  const [saveProblem, setSaveProblem] = useState<Problem>();
  const [actionProblem, setActionProblem] = useState<Problem>();
  const confirm = useConfirm();
  const current = presets.find((x) => String(x.id) === chosen);
  const notKept = FILTERS.filter((k) => props.applied[k] && !(PRESET_KEYS as readonly FilterName[]).includes(k));
  // The API's words for the name (empty, too long, taken) go next to the field; anything else under the form.
  const nameError =
    saveProblem &&
    (saveProblem.fields.presetName ?? (/presetName|preset with name/i.test(saveProblem.title) ? saveProblem.title : undefined));

  const save = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    try {
      const r = await api.POST('/api/search-presets', { body: { presetName: name, filters: presetFiltersOf(props.applied) } });
      setSaveProblem(problem(r));
      if (!r.data) return;
      toast(`Saved the search "${r.data.data.presetName}"`);
      setName('');
      setChosen(String(r.data.data.id));
      list.reload();
    } catch (err) {
      setSaveProblem(networkProblem(err));
    } finally {
      setSaving(false);
    }
  };
  const remove = async () => {
    if (!current) return;
    const sure = await confirm.ask({
      title: `Delete the saved search ${current.presetName}?`,
      body: <p>Only the saved search is deleted: no image changes.</p>,
      confirmLabel: 'Delete',
    });
    if (!sure) return;
    const r = await api.DELETE('/api/search-presets/{id}', { params: { path: { id: String(current.id) } } });
    setActionProblem(problem(r));
    if (!r.response.ok) return;
    toast(`Deleted the saved search "${current.presetName}"`);
    setChosen('');
    list.reload();
  };
  const sortBy = current?.filters.sortBy;

  return (
    <section class="card saved-searches" aria-labelledby="saved-searches-title">
      <h2 id="saved-searches-title">Saved searches</h2>
      {confirm.dialog}
      <div class="row">
        <div class="field">
          <label for="saved-search">Saved search</label>
          <select id="saved-search" value={chosen} onChange={(e) => setChosen(e.currentTarget.value)}>
            <option value="">{presets.length ? 'Choose one…' : 'None saved yet'}</option>
            {presets.map((x) => (
              <option key={x.id} value={String(x.id)}>
                {x.presetName}
              </option>
            ))}
          </select>
        </div>
        <Button disabled={!current} onClick={() => current && props.onApply(filtersOfPreset(current.filters))}>
          Apply saved search
        </Button>
        <Button variant="danger" disabled={!current} onClick={() => void remove()}>
          Delete saved search
        </Button>
      </div>
      {sortBy && sortBy !== 'newest' && (
        <p class="muted">This saved search sorts by {sortBy}; the gallery shows its images newest first.</p>
      )}
      <ErrorBanner problem={list.problem ?? actionProblem} />
      <form class="row" onSubmit={save} noValidate aria-label="Save the current filters">
        <Field label="Name of the saved search" value={name} onInput={setName} max={SEARCH_PRESET_NAME_MAX} error={nameError} />
        <Button type="submit" busy={saving}>
          Save current filters
        </Button>
      </form>
      {notKept.length > 0 && <p class="muted">Not kept in a saved search: {notKept.map((k) => LABELS[k]).join(', ')}.</p>}
      {!nameError && <ErrorBanner problem={saveProblem} />}
    </section>
  );
}
