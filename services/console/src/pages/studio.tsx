/**
 * The studio (issue 38 item 4): a prompt and the options the chosen model takes, the tenant's own saved assets,
 * submitted as an async job (`Prefer: respond-async`) whose progress, steps and log lines arrive live over the
 * execution stream; the images appear in place, each linking to its page. Errors are said in words next to the
 * field or the button (402 quota, 429 and the wait, 400 details, content blocked).
 */
import { useState } from 'preact/hooks';
import {
  ASPECT_RATIOS,
  BACKGROUNDS,
  CHARACTERS_PER_REQUEST_MAX,
  IMAGES_PER_REQUEST_MAX,
  MODEL_IDS,
  MODERATIONS,
  NEGATIVE_PROMPT_MAX,
  OUTPUT_COMPRESSION_MAX,
  OUTPUT_FORMATS,
  PRODUCTS_PER_REQUEST_MAX,
  PROMPT_MAX,
  QUALITIES,
  RESOLUTION_TIERS,
  STANDARD_QUALITIES,
} from '../../../../libs/api-schemas/src/vocab';
import { api, type Problem, type paths, problem, problemOf } from '../api';
import { useLiveStream } from '../components/live-stream';
import { Button, Check, ErrorBanner, Field, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link } from '../router';
import {
  AssetChecks,
  type AssetPage,
  AssetSelect,
  findCharacters,
  findProducts,
  findScenes,
  findStylePresets,
  listCharacters,
  listProducts,
  listScenes,
  listStylePresets,
  Select,
  scenePage,
  stylePresetPage,
} from './studio-controls';
import './tenant-pages.css';
import './studio.css';

type Body = NonNullable<paths['/api/images']['post']['requestBody']>['content']['application/json'];
type ModelId = (typeof MODEL_IDS)[number];

/** What a model takes (the generation service's catalogue, services/generation/src/models.ts). */
function capabilities(model: string) {
  const provider: 'provA' | 'provB' | undefined = model.startsWith('provB') ? 'provB' : model.startsWith('provA') ? 'provA' : undefined;
  return {
    provider,
    /** provA flash and pro: tiers above 1k and web search. */
    higherTiers: provider === 'provA' && model !== 'provA-flash-lite-image',
    /** provB 2.5: quality xhigh/max and transparent backgrounds. */
    extended: model.startsWith('provB-image-2.5'),
  };
}

interface GeneratedImage {
  record_id: number;
  thumbnail_url: string;
  width: number;
  height: number;
  prompt: string;
}

interface Job {
  executionId: string;
  streamUrl: string;
}

/** The tenant's models (GET /api/profile, extension) and its own saved assets: what the studio offers. */
async function loadChoices(): Promise<{
  value?: {
    models: string[];
    defaultModel: string;
    presets: AssetPage;
    characters: AssetPage;
    products: AssetPage;
    scenes: AssetPage;
  };
  problem?: Problem;
}> {
  const [t, presets, characters, products, scenes] = await Promise.all([
    api.GET('/api/profile'),
    listStylePresets(),
    listCharacters(),
    listProducts(),
    listScenes(),
  ]);
  const failed = problem(t) ?? presets.problem ?? characters.problem ?? products.problem ?? scenes.problem;
  if (failed) return { problem: failed };
  const tenant = t.data?.tenant;
  const none: AssetPage = { items: [], more: false };
  return {
    value: {
      // In the catalogue's order (the profile answers the allowlist as the administrator wrote it).
      models: MODEL_IDS.filter((m) => tenant?.allowedModels.includes(m)),
      defaultModel: tenant?.modelId ?? '',
      presets: presets.value ?? none,
      characters: characters.value ?? none,
      products: products.value ?? none,
      scenes: scenes.value ?? none,
    },
  };
}

export default function Studio(_props: PageProps) {
  usePageTitle('Studio');
  const [prompt, setPrompt] = useState('');
  const [negative, setNegative] = useState('');
  /** The model picked; until one is, the tenant's default (once its models are known). */
  const [picked, setModel] = useState('');
  const [aspect, setAspect] = useState('');
  const [n, setN] = useState('1');
  // provA
  const [tier, setTier] = useState('');
  const [thinking, setThinking] = useState(false);
  const [search, setSearch] = useState(false);
  // provB
  const [size, setSize] = useState('');
  const [quality, setQuality] = useState('');
  const [format, setFormat] = useState('');
  const [compression, setCompression] = useState('');
  const [background, setBackground] = useState('');
  const [moderation, setModeration] = useState('');
  // saved assets
  const [presetId, setPresetId] = useState('');
  const [characterIds, setCharacterIds] = useState<number[]>([]);
  const [productIds, setProductIds] = useState<number[]>([]);
  const [sceneId, setSceneId] = useState('');

  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<Problem>();
  const [job, setJob] = useState<Job>();
  const [images, setImages] = useState<GeneratedImage[]>([]);

  const choices = useLoad(loadChoices, []);
  const a = choices.value;
  const model = picked || a?.defaultModel || '';
  const caps = capabilities(model);
  const promptMax = caps.provider ? PROMPT_MAX[caps.provider] : Math.min(PROMPT_MAX.provA, PROMPT_MAX.provB);
  const compressible = format === 'jpeg' || format === 'webp';

  const finished = async () => {
    if (!job) return;
    const r = await api.GET('/api/executions/{executionId}', { params: { path: { executionId: job.executionId } } });
    setBusy(false);
    const p = problem(r);
    if (p) return setFailure(p);
    const e = r.data?.execution;
    if (e?.status === 'completed') {
      const result = e.result as { data?: { images?: GeneratedImage[] } } | undefined;
      setImages(result?.data?.images ?? []);
    } else {
      setFailure(problemOf(400, { error: e?.error ?? `The generation ended ${e?.status ?? 'without an answer'}` }));
    }
  };
  const live = useLiveStream(job?.streamUrl ?? null, true, () => void finished());
  const status = job ? live.status[job.executionId] : undefined;

  const local: Record<string, string> = {};
  if (prompt.length > promptMax) local.prompt = `prompt must be at most ${promptMax.toLocaleString()} characters for this model`;
  if (negative.length > NEGATIVE_PROMPT_MAX) local.negative_prompt = `negative_prompt must be at most ${NEGATIVE_PROMPT_MAX} characters`;
  if (compression && compressible) {
    const c = Number(compression);
    if (!Number.isInteger(c) || c < 0 || c > OUTPUT_COMPRESSION_MAX) {
      local.output_compression = `output_compression must be a whole number from 0 to ${OUTPUT_COMPRESSION_MAX}`;
    }
  }
  const fields = { ...(failure?.fields ?? {}), ...local };
  // "model_id <id> is not allowed for this tenant (allowed: ...)": the tenant's allowlist, said next to the model.
  const modelDetail = failure?.details.find((d) => d.startsWith('model_id '));
  if (modelDetail && !fields.model_id) fields.model_id = modelDetail;

  const body = (): Body => {
    const b: Body = { prompt, n: Number(n) };
    if (negative) b.negative_prompt = negative;
    if (model) b.model_id = model as ModelId;
    if (aspect) b.aspect_ratio = aspect as Body['aspect_ratio'];
    if (caps.provider === 'provA') {
      if (tier) b.resolution_tier = tier;
      if (thinking) b.enable_thinking = true;
      if (search && caps.higherTiers) b.use_provA_search = true;
    }
    if (caps.provider === 'provB') {
      if (size) b.size = size;
      if (quality) b.quality = quality as Body['quality'];
      if (format) b.output_format = format as Body['output_format'];
      if (compression && compressible) b.output_compression = Number(compression);
      if (background) b.background = background as Body['background'];
      if (moderation) b.moderation = moderation as Body['moderation'];
    }
    if (presetId) b.style_preset_id = Number(presetId);
    if (characterIds.length === 1) b.character_id = characterIds[0];
    if (characterIds.length > 1) b.character_ids = characterIds;
    if (productIds.length === 1) b.product_id = productIds[0];
    if (productIds.length > 1) b.product_ids = productIds;
    if (sceneId) b.reference_group_id = Number(sceneId);
    return b;
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    if (Object.keys(local).length > 0) return;
    setBusy(true);
    setFailure(undefined);
    setImages([]);
    setJob(undefined);
    try {
      const r = await api.POST('/api/images', { body: body(), headers: { Prefer: 'respond-async' } });
      const p = problem(r);
      if (p) {
        setFailure(p);
        setBusy(false);
        return;
      }
      const d = r.data?.data as Partial<Job> & { images?: GeneratedImage[] };
      if (d?.images) {
        // The server did not apply the preference (a synchronous answer): the images are here already.
        setImages(d.images);
        setBusy(false);
      } else if (d?.executionId && d.streamUrl) setJob({ executionId: d.executionId, streamUrl: d.streamUrl });
      else {
        setFailure(problemOf(r.response.status, { error: 'The server answered without a job' }));
        setBusy(false);
      }
    } catch (err) {
      setFailure({ status: 0, title: `No answer from the server: ${String(err)}`, details: [], fields: {} });
      setBusy(false);
    }
  };

  return (
    <>
      <h1>Studio</h1>
      <form class="studio" onSubmit={submit} noValidate>
        <div class="studio-main">
          <Field label="Prompt" value={prompt} onInput={setPrompt} max={promptMax} error={fields.prompt} multiline rows={5} required />
          <Field
            label="Negative prompt"
            value={negative}
            onInput={setNegative}
            max={NEGATIVE_PROMPT_MAX}
            error={fields.negative_prompt}
            hint="What to avoid"
            multiline
            rows={2}
          />
          <div class="row">
            <Select
              label="Model"
              value={model}
              onInput={setModel}
              options={
                a ? a.models.map((m) => (m === a.defaultModel ? ([m, `${m} (default)`] as const) : m)) : [['', "The tenant's default"]]
              }
              error={fields.model_id}
              hint={a ? `The models this tenant may use (${a.models.length})` : undefined}
            />
            <Select
              label="Aspect ratio"
              value={aspect}
              onInput={setAspect}
              options={[['', 'Default'], ...ASPECT_RATIOS]}
              error={fields.aspect_ratio}
            />
            <Select
              label="Images"
              value={n}
              onInput={setN}
              options={Array.from({ length: IMAGES_PER_REQUEST_MAX }, (_, i) => String(i + 1))}
              error={fields.n}
            />
          </div>
          {caps.provider === 'provA' && (
            <fieldset class="studio-options" data-provider="provA">
              <legend>{model} options</legend>
              <div class="row">
                <Select
                  label="Resolution tier"
                  value={tier}
                  onInput={setTier}
                  options={[['', 'Default'], ...(caps.higherTiers ? RESOLUTION_TIERS : (['1k'] as const))]}
                  error={fields.resolution_tier}
                  hint={caps.higherTiers ? undefined : 'This model is fixed at 1k'}
                />
              </div>
              <Check label="Thinking" checked={thinking} onChange={setThinking} />
              {caps.higherTiers && <Check label="Web search grounding" checked={search} onChange={setSearch} />}
              {fields.enable_thinking && <p class="field-error">{fields.enable_thinking}</p>}
              {fields.use_provA_search && <p class="field-error">{fields.use_provA_search}</p>}
            </fieldset>
          )}
          {caps.provider === 'provB' && (
            <fieldset class="studio-options" data-provider="provB">
              <legend>{model} options</legend>
              <div class="row">
                <Field
                  label="Size"
                  value={size}
                  onInput={setSize}
                  error={fields.size}
                  hint="auto or WIDTHxHEIGHT, e.g. 1024x1536"
                  name="size"
                />
                <Select
                  label="Quality"
                  value={quality}
                  onInput={setQuality}
                  options={[['', 'Default'], ...(caps.extended ? QUALITIES : STANDARD_QUALITIES)]}
                  error={fields.quality}
                />
                <Select
                  label="Format"
                  value={format}
                  onInput={setFormat}
                  options={[['', 'Default (png)'], ...OUTPUT_FORMATS]}
                  error={fields.output_format}
                />
                {compressible && (
                  <Field
                    label="Compression (%)"
                    type="number"
                    value={compression}
                    onInput={setCompression}
                    error={fields.output_compression}
                    hint={`0-${OUTPUT_COMPRESSION_MAX}`}
                  />
                )}
                <Select
                  label="Background"
                  value={background}
                  onInput={setBackground}
                  options={[['', 'Default'], ...BACKGROUNDS.filter((x) => x !== 'transparent' || caps.extended)]}
                  error={fields.background}
                />
                <Select
                  label="Moderation"
                  value={moderation}
                  onInput={setModeration}
                  options={[['', 'Default (auto)'], ...MODERATIONS]}
                  error={fields.moderation}
                />
              </div>
            </fieldset>
          )}
          <ErrorBanner problem={choices.problem} />
          {a && (
            <fieldset class="studio-options">
              <legend>Saved assets</legend>
              <div class="row studio-asset-row">
                <AssetSelect
                  label="Style preset"
                  plural="style presets"
                  value={presetId}
                  onInput={setPresetId}
                  first={a.presets}
                  page={stylePresetPage}
                  find={findStylePresets}
                  error={fields.style_preset_id}
                />
                <AssetSelect
                  label="Scene"
                  plural="scenes"
                  value={sceneId}
                  onInput={setSceneId}
                  first={a.scenes}
                  page={scenePage}
                  find={findScenes}
                  error={fields.reference_group_id}
                />
              </div>
              <AssetChecks
                legend="Characters"
                items={a.characters.items}
                more={a.characters.more}
                find={findCharacters}
                chosen={characterIds}
                max={CHARACTERS_PER_REQUEST_MAX}
                onChange={setCharacterIds}
                error={fields.character_id ?? fields.character_ids}
              />
              <AssetChecks
                legend="Products"
                items={a.products.items}
                more={a.products.more}
                find={findProducts}
                chosen={productIds}
                max={PRODUCTS_PER_REQUEST_MAX}
                onChange={setProductIds}
                error={fields.product_id ?? fields.product_ids}
              />
              {[a.presets, a.scenes, a.characters, a.products].every((x) => x.items.length === 0) && (
                <p class="muted">
                  No saved assets yet: <Link href="/assets">create style presets, characters, products or scenes</Link>.
                </p>
              )}
            </fieldset>
          )}
          <div class="row">
            <Button type="submit" variant="primary" busy={busy} disabled={!prompt.trim()}>
              Generate
            </Button>
          </div>
          <ErrorBanner problem={failure} />
        </div>
      </form>

      {job && (
        <section class="card studio-progress" aria-labelledby="studio-progress">
          <h2 id="studio-progress">Progress</h2>
          <p>
            <Link href={`/executions/${encodeURIComponent(job.executionId)}`}>Execution {job.executionId}</Link>:{' '}
            <span data-testid="job-status">{status?.status ?? (live.state === 'connecting' ? 'queued' : live.state)}</span>
            {status?.currentStep && status.currentStep !== status.status && (
              <>
                {' '}
                · <span data-testid="job-step">{status.currentStep}</span>
              </>
            )}
          </p>
          <progress max={100} value={status?.progressPercent ?? 0} aria-label="Generation progress">
            {status?.progressPercent ?? 0}%
          </progress>{' '}
          <span data-testid="job-percent">{status?.progressPercent ?? 0}%</span>
          {live.state === 'lost' && <p class="field-error">The live connection was lost; the execution page shows its state.</p>}
          <ol class="studio-log" aria-label="Generation log">
            {live.logs.map((l, i) => (
              <li key={`${l.timestamp}-${i}`} class={`studio-log-${l.level}`}>
                <time dateTime={l.timestamp}>{new Date(l.timestamp).toLocaleTimeString()}</time>
                {l.level === 'info' ? ' ' : ` ${l.level === 'warn' ? 'warning' : 'error'}: `}
                {l.message}
              </li>
            ))}
          </ol>
        </section>
      )}

      {images.length > 0 && (
        <section aria-labelledby="studio-results">
          <h2 id="studio-results">Results</h2>
          <ul class="thumbs">
            {images.map((im) => (
              <li key={im.record_id}>
                <Link href={`/images/${im.record_id}`} aria-label={`Image ${im.record_id}: ${im.prompt.slice(0, 60)}`}>
                  <img
                    src={im.thumbnail_url}
                    alt=""
                    width={200}
                    height={Math.round((200 * im.height) / Math.max(1, im.width))}
                    loading="lazy"
                  />
                </Link>
              </li>
            ))}
          </ul>
        </section>
      )}
    </>
  );
}
