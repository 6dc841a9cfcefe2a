// The Train panel: a byte-level GPT learns a text in the page. The engine trains in a Worker of
// its own, a few steps per message (about a fifth of a second's work), so the page stays
// responsive, Pause takes effect after the steps in flight, and the views' runs go in between.
// Every PUBLISH_EVERY steps, and when paused or done, the model as it is then becomes the page's
// model in that same Worker (`trainer.useModel()`): the attention grid, the LayerNorm strips and
// the next token follow the training. Download saves config.json + model.safetensors, which
// "Open files…" (or Model.load, the CLI, transformers) loads back.
import { createWorkerClient, type GptlensWorker, type ModelFiles, type TrainProgress, type TrainRecipe, type TrainShape, type WorkerTrainer } from 'gptlens';
import { cssVar, formatBytes, formatCount, h, trackWidth } from '../dom.ts';
import { Engine, engineCrash } from '../engine.ts';
import type { Loader } from '../loader.ts';
import type { ModelSource } from '../model-files.ts';
import { download, howTo } from '../panel-tools.ts';
import type { Store } from '../store.ts';
import { SAMPLE_NAME, SAMPLE_TEXT } from '../train-sample.ts';

/** Steps between two moments the page's model becomes the trained one (also on pause and at the end). */
export const PUBLISH_EVERY = 25;
/** The work one message to the Worker carries, in seconds: Pause answers within about this. */
const CHUNK_SECONDS = 0.2;
const VAL_FRACTION = 0.1;

/** Shapes to train; picking one with `run` also fills in its steps, batch and learning rate. */
export const PRESETS: Record<'tiny' | 'small' | 'shipped', { label: string; shape: TrainShape; run?: { steps: number; batch: number; lr: number } }> = {
  tiny: { label: 'Tiny: 2 layers × 2 heads × 64 wide, context 64', shape: { nLayer: 2, nHead: 2, dModel: 64, nCtx: 64 } },
  small: { label: 'Small: 4 layers × 4 heads × 128 wide, context 64', shape: { nLayer: 4, nHead: 4, dModel: 128, nCtx: 64 } },
  // gptlens-shakespeare's shape and recipe (assets/models/gptlens-shakespeare/training.json): on the
  // Shakespeare corpus, about twice as long here as the CLI's 18 minutes.
  shipped: {
    label: 'As shipped (gptlens-shakespeare): 4 layers × 4 heads × 128 wide, context 256',
    shape: { nLayer: 4, nHead: 4, dModel: 128, nCtx: 256 },
    run: { steps: 7000, batch: 4, lr: 0.002 },
  },
};
type Preset = keyof typeof PRESETS;

const SHAKESPEARE_URL = '/data/shakespeare.txt';

type Phase = 'idle' | 'running' | 'pausing' | 'paused' | 'done';

interface TextChoice {
  name: string;
  read: () => Promise<Uint8Array>;
}

/** The trained model as a source the loader can read again (a backend switch): the trainer's files as they are then. */
function trainedSource(trainer: WorkerTrainer, name: string): ModelSource {
  let files: Promise<ModelFiles> | undefined;
  const open = (file: 'config.json' | 'model.safetensors') => async () => {
    files ??= trainer.files();
    const bytes = (await files)[file]!;
    if (file === 'model.safetensors') files = undefined; // the next read asks again
    return { body: new Blob([bytes as Uint8Array<ArrayBuffer>]).stream(), bytes: bytes.byteLength };
  };
  return { name, bytes: undefined, files: [{ name: 'config.json', open: open('config.json') }, { name: 'model.safetensors', open: open('model.safetensors') }] };
}

function message(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\.$/, '');
}

export function mountTrain(root: HTMLElement, store: Store, loader: Loader, threads: number | undefined): void {
  // --- Controls.
  const expand = h('button', { type: 'button', class: 'quiet', 'aria-expanded': 'false', 'aria-controls': 'train-body', 'data-testid': 'train-toggle' }, 'Show');
  const preset = h(
    'select',
    {
      id: 'train-preset',
      'data-testid': 'train-preset',
      onchange: () => {
        const run = PRESETS[preset.value as Preset].run;
        if (run) [steps.value, batch.value, lr.value] = [String(run.steps), String(run.batch), String(run.lr)];
      },
    },
    ...Object.entries(PRESETS).map(([value, { label }]) => h('option', { value }, label)),
  );
  const number = (id: string, value: string, attributes: Record<string, string | number>) =>
    h('input', { id, type: 'number', value, required: true, 'data-testid': id, ...attributes });
  const steps = number('train-steps', '300', { min: 1, max: 100000, step: 1 });
  const batch = number('train-batch', '12', { min: 1, max: 256, step: 1 });
  const lr = number('train-lr', '0.001', { min: 0.00001, max: 1, step: 'any' });
  const textSelect = h('select', { id: 'train-text', 'data-testid': 'train-text' }, h('option', { value: 'sample' }, `${SAMPLE_NAME} · ${formatBytes(new TextEncoder().encode(SAMPLE_TEXT).length)}`));
  const textFile = h('input', { type: 'file', accept: '.txt,text/plain', hidden: true, 'data-testid': 'train-file' });
  const openText = h('button', { type: 'button', title: 'Train on a text file of your own (or drop one on this panel)' }, 'Open text…');
  const start = h('button', { type: 'button', class: 'primary', 'data-testid': 'train-start' }, 'Start');
  const reset = h('button', { type: 'button', 'data-testid': 'train-reset', disabled: true, title: 'Forget the training (the page keeps the model it shows)' }, 'Reset');
  const save = h('button', { type: 'button', 'data-testid': 'train-download', disabled: true, title: 'Download config.json and model.safetensors: “Open files…” loads them back' }, 'Download');
  const figure = h('p', { class: 'train-figure', 'data-testid': 'train-figure' }, 'Not started.');
  const announce = h('div', { class: 'visually-hidden', 'aria-live': 'polite', 'data-testid': 'train-announce' });
  const error = h('p', { class: 'train-error', role: 'alert', 'data-testid': 'train-error', hidden: true });
  const canvas = h('canvas', { class: 'train-chart', role: 'img', 'aria-label': 'Loss curve: no steps yet', 'data-testid': 'train-chart', height: 220 });
  const chartBox = h('div', { class: 'train-chart-box' }, canvas);
  const legend = h(
    'p',
    { class: 'muted train-legend' },
    h('span', { class: 'train-swatch train-swatch-line', 'aria-hidden': 'true' }),
    ' training loss (every step) ',
    h('span', { class: 'train-swatch train-swatch-dot', 'aria-hidden': 'true' }),
    ' validation loss (held-out last 10 % of the text)',
  );
  const help = howTo(
    'train',
    'A GPT of your chosen shape starts from random weights and learns the text byte by byte: each step reads a batch of random windows of the context’s length and nudges every weight to predict each next byte better (AdamW, nanoGPT’s character-level recipe). The loss is the cross-entropy in nats: ln 256 ≈ 5.5 is a uniform guess.',
    `Every ${PUBLISH_EVERY} steps, and when paused or done, the model as it is becomes the page’s model: the attention maps, LayerNorm strips and next-token view show what it has learned so far. Its tokenizer is the bytes of the text.`,
  );
  const field = (label: string, control: HTMLElement) => h('span', { class: 'train-field' }, h('label', { for: control.id }, label), control);
  const body = h(
    'div',
    { id: 'train-body', class: 'train-body', hidden: true },
    help.note,
    h(
      'div',
      { class: 'train-controls' },
      field('Shape', preset),
      field('Steps', steps),
      field('Batch', batch),
      field('Learning rate', lr),
      h('span', { class: 'train-field' }, h('label', { for: 'train-text' }, 'Text'), h('span', { class: 'train-text-row' }, textSelect, openText, textFile)),
    ),
    h('div', { class: 'train-actions' }, start, reset, save),
    figure,
    announce,
    error,
    chartBox,
    legend,
  );
  root.append(h('header', { class: 'panel-head' }, h('h2', {}, 'Train'), h('span', { class: 'muted' }, 'a byte-level GPT, in this page'), h('span', { class: 'spacer' }), expand, help.toggle), body);
  expand.addEventListener('click', () => {
    body.hidden = !body.hidden;
    expand.setAttribute('aria-expanded', String(!body.hidden));
    expand.textContent = body.hidden ? 'Show' : 'Hide';
    if (body.hidden) return;
    offerCorpus();
    draw();
  });

  // --- Text sources: the bundled sample, the full corpus when the server has it, a file.
  const texts = new Map<string, TextChoice>([['sample', { name: SAMPLE_NAME, read: async () => new TextEncoder().encode(SAMPLE_TEXT) }]]);
  // Whether the server has the full corpus is asked when the panel is first opened, not while the
  // page starts and loads its model.
  let corpusAsked = false;
  const offerCorpus = () => {
    if (corpusAsked) return;
    corpusAsked = true;
    void fetch(SHAKESPEARE_URL, { method: 'HEAD' })
      .then((response) => {
        if (!response.ok) return;
        const bytes = Number(response.headers.get('Content-Length'));
        texts.set('shakespeare', {
          name: 'Shakespeare (38 plays)',
          read: async () => {
            const got = await fetch(SHAKESPEARE_URL);
            if (!got.ok) throw new Error(`${SHAKESPEARE_URL} answered ${got.status}`);
            return new Uint8Array(await got.arrayBuffer());
          },
        });
        textSelect.append(h('option', { value: 'shakespeare' }, `Shakespeare (38 plays) · ${formatBytes(bytes)}`));
      })
      .catch(() => {});
  };
  const useFile = (file: File) => {
    texts.set('file', { name: file.name, read: async () => new Uint8Array(await file.arrayBuffer()) });
    let option = textSelect.querySelector<HTMLOptionElement>('option[value=file]');
    if (!option) textSelect.append((option = h('option', { value: 'file' })));
    option.textContent = `${file.name} · ${formatBytes(file.size)}`;
    textSelect.value = 'file';
  };
  openText.addEventListener('click', () => textFile.click());
  textFile.addEventListener('change', () => {
    const file = textFile.files?.[0];
    if (file) useFile(file);
    textFile.value = '';
  });
  // A text dropped here is for training, not a model to open (the page-wide drop handler).
  root.addEventListener('dragover', (event) => {
    if (!event.dataTransfer?.types.includes('Files') || body.hidden || trainer) return;
    event.preventDefault();
    event.stopPropagation();
  });
  root.addEventListener('drop', (event) => {
    if (body.hidden || trainer) return;
    event.preventDefault();
    event.stopPropagation();
    const file = event.dataTransfer?.files[0];
    if (file) useFile(file);
  });

  // --- Training.
  let client: GptlensWorker | undefined;
  let trainer: WorkerTrainer | undefined;
  let phase: Phase = 'idle';
  let textName = '';
  let losses: number[] = [];
  let valLosses: [number, number][] = [];
  let totalSteps = 0;
  let tokensPerStep = 0;
  let trainedTokens = 0;
  let trainedSeconds = 0;
  let publishedAt = 0;
  /** The engine this panel last made the page's model (so a newer snapshot keeps the open head). */
  let shown: Engine | undefined;
  let loop: Promise<void> = Promise.resolve();
  /** The page follows the training: set by Start and Resume, cleared when the reader opens another model. */
  let followed = false;
  store.subscribe((state, changed) => {
    if (changed.has('model') && state.model !== undefined && state.model.engine !== shown) followed = false;
  });

  const settings = (): { shape: TrainShape; recipe: Partial<TrainRecipe> } | string => {
    const count = Number(steps.value);
    const size = Number(batch.value);
    const rate = Number(lr.value);
    if (!Number.isInteger(count) || count < 1 || count > 100000) return 'Steps must be a whole number from 1 to 100000.';
    if (!Number.isInteger(size) || size < 1 || size > 256) return 'Batch must be a whole number from 1 to 256.';
    if (!(rate > 0 && rate <= 1)) return 'The learning rate must be a number above 0 and at most 1.';
    // Warm up over a tenth of the run (at most nanoGPT's 100 steps); about 10 validation points.
    const recipe: Partial<TrainRecipe> = {
      steps: count,
      batch: size,
      lr: rate,
      minLr: rate / 10,
      warmup: Math.min(100, Math.floor(count / 10)),
      evalEvery: Math.max(5, Math.round(count / 10)),
      evalBatches: 4,
    };
    return { shape: PRESETS[preset.value as Preset].shape, recipe };
  };

  const lockSettings = () => {
    const locked = trainer !== undefined || phase === 'running';
    for (const control of [preset, steps, batch, lr, textSelect, openText]) control.disabled = locked;
    reset.disabled = trainer === undefined && phase === 'idle';
    save.disabled = trainer === undefined || losses.length === 0 || phase === 'running' || phase === 'pausing';
    start.disabled = phase === 'pausing' || phase === 'done';
    start.textContent = phase === 'running' ? 'Pause' : phase === 'pausing' ? 'Pausing…' : phase === 'paused' ? 'Resume' : phase === 'done' ? 'Done' : 'Start';
    root.dataset.phase = phase;
  };

  const showError = (text: string | undefined) => {
    error.hidden = text === undefined;
    error.textContent = text ?? '';
  };

  const rate = () => (trainedSeconds > 0 ? trainedTokens / trainedSeconds : 0);

  const describe = () => {
    const step = losses.length;
    if (step === 0) return phase === 'running' ? 'Starting…' : 'Not started.';
    const val = valLosses.at(-1);
    return `Step ${step} / ${totalSteps} · loss ${losses.at(-1)!.toFixed(3)}${val ? ` · validation ${val[1].toFixed(3)} (step ${val[0]})` : ''} · ${Math.round(rate()).toLocaleString('en')} tokens/s`;
  };

  const render = () => {
    figure.textContent = describe();
    root.dataset.steps = String(losses.length);
    root.dataset.tokensPerSecond = String(rate());
    lockSettings();
    draw();
  };

  const say = (text: string) => (announce.textContent = text);

  /** The model as it is now becomes the page's model. */
  const publish = async () => {
    if (!client || !trainer || losses.length === 0 || !followed) return;
    const step = losses.length;
    if (step === publishedAt && shown !== undefined && store.state.model?.engine === shown) return;
    const info = await trainer.useModel();
    const engine = await Engine.borrow(client, info);
    const engineBytes = await engine.engineMemory();
    const keepView = shown !== undefined && store.state.model?.engine === shown;
    shown = engine;
    publishedAt = step;
    loader.show(engine, trainedSource(trainer, `trained in the page · step ${step}`), { bytes: info.nParams * 4, engineBytes, keepView });
  };

  const train = async () => {
    const chosen = settings();
    if (typeof chosen === 'string') {
      showError(chosen);
      phase = 'idle';
      render();
      return;
    }
    if (!trainer) {
      const choice = texts.get(textSelect.value) ?? texts.get('sample')!;
      say('Training started.');
      client ??= await createWorkerClient(threads === undefined ? { backend: 'cpu' } : { threads, backend: 'cpu' });
      const made = await client.trainer(chosen.shape, chosen.recipe);
      try {
        await made.setText(await choice.read(), VAL_FRACTION);
      } catch (failure) {
        void made.free();
        throw new Error(`${choice.name} cannot be learned: ${message(failure)}`);
      }
      trainer = made;
      textName = choice.name;
      const recipe = made.recipe();
      totalSteps = recipe.steps;
      tokensPerStep = recipe.batch * made.shape.nCtx;
      root.dataset.params = String(made.paramCount);
      figure.title = `${formatCount(made.paramCount)} parameters · ${textName}`;
    } else {
      say(`Training resumed at step ${losses.length}.`);
    }
    render();
    let chunk = 1;
    while (phase === 'running' && losses.length < totalSteps) {
      const progress: TrainProgress[] = await trainer.train(chunk);
      if (progress.length === 0) break;
      const last = progress.at(-1)!;
      for (const { loss, step, valLoss } of progress) {
        losses.push(loss);
        if (typeof valLoss === 'number') valLosses.push([step, valLoss]);
      }
      trainedTokens += progress.length * tokensPerStep;
      trainedSeconds += last.seconds;
      // Aim each message at CHUNK_SECONDS of work.
      chunk = Math.max(1, Math.min(50, Math.round((CHUNK_SECONDS * progress.length) / Math.max(last.seconds, 1e-3))));
      render();
      if (losses.length - publishedAt >= PUBLISH_EVERY && losses.length < totalSteps) {
        await publish();
        say(describe());
      }
    }
    const finished = losses.length >= totalSteps;
    phase = finished ? 'done' : 'paused';
    await publish();
    render();
    say(`${finished ? 'Training done' : 'Paused'}: ${describe()}.${followed ? ' The page now shows the trained model.' : ''}`);
  };

  const run = () => {
    phase = 'running';
    followed = true;
    showError(undefined);
    lockSettings();
    loop = train().catch((failure: unknown) => {
      if (engineCrash(failure) !== undefined) {
        // The Worker's engine is gone, and the trainer with it.
        client?.terminate();
        client = undefined;
        trainer = undefined;
      }
      phase = trainer ? 'paused' : 'idle';
      showError(`Training stopped: ${message(failure)}.`);
      render();
    });
  };

  start.addEventListener('click', () => {
    if (phase === 'running') {
      phase = 'pausing';
      lockSettings();
    } else if (phase === 'idle' || phase === 'paused') {
      run();
    }
  });

  reset.addEventListener('click', async () => {
    if (phase === 'running') phase = 'pausing';
    lockSettings();
    await loop;
    void trainer?.free().catch(() => {});
    trainer = undefined;
    losses = [];
    valLosses = [];
    trainedTokens = 0;
    trainedSeconds = 0;
    publishedAt = 0;
    totalSteps = 0;
    phase = 'idle';
    showError(undefined);
    render();
    say('Training reset.');
  });

  save.addEventListener('click', async () => {
    if (!trainer) return;
    try {
      const files = await trainer.files();
      for (const [name, bytes] of Object.entries(files)) {
        download(name, new Blob([bytes as Uint8Array<ArrayBuffer>], { type: name.endsWith('.json') ? 'application/json' : 'application/octet-stream' }));
      }
    } catch (failure) {
      showError(`Could not download the model: ${message(failure)}.`);
    }
  });

  // --- The loss curve.
  function draw(): void {
    if (body.hidden) return;
    const width = Math.max(200, chartWidth());
    const height = 220;
    const ratio = devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const context = canvas.getContext('2d')!;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    const margin = { left: 54, right: 14, top: 10, bottom: 38 };
    const plotWidth = width - margin.left - margin.right;
    const plotHeight = height - margin.top - margin.bottom;
    const muted = cssVar('--text-muted');
    const values = [...losses, ...valLosses.map(([, loss]) => loss)];
    const high = values.length > 0 ? Math.max(...values) : Math.log(256);
    const low = values.length > 0 ? Math.min(...values) : 0;
    // Round ticks: a step of 1, 2 or 5 × 10^k giving about four intervals.
    const rough = Math.max(high - low, 0.1) / 4;
    const unit = 10 ** Math.floor(Math.log10(rough));
    const tick = [1, 2, 5, 10].map((factor) => factor * unit).find((candidate) => candidate >= rough)!;
    const [top, bottom] = [Math.ceil((high + 1e-9) / tick) * tick, Math.max(0, Math.floor(low / tick) * tick)];
    const lastStep = Math.max(totalSteps || Number(steps.value) || 1, 1);
    const x = (step: number) => margin.left + (step / lastStep) * plotWidth;
    const y = (loss: number) => margin.top + ((top - loss) / (top - bottom)) * plotHeight;
    context.font = `11px ${cssVar('--font-sans')}`;
    context.fillStyle = muted;
    context.strokeStyle = cssVar('--grid');
    context.lineWidth = 1;
    // Axes: y ticks (loss), x ticks (step), and their names.
    context.textAlign = 'right';
    context.textBaseline = 'middle';
    for (let value = bottom; value <= top + tick / 2; value += tick) {
      context.beginPath();
      context.moveTo(margin.left, y(value));
      context.lineTo(margin.left + plotWidth, y(value));
      context.stroke();
      context.fillText(value.toFixed(tick >= 1 ? 0 : tick >= 0.1 ? 1 : 2), margin.left - 6, y(value));
    }
    context.textAlign = 'center';
    context.textBaseline = 'top';
    for (let i = 0; i <= 4; i++) {
      const step = Math.round((lastStep * i) / 4);
      context.fillText(String(step), x(step), margin.top + plotHeight + 4);
    }
    context.fillText('step', margin.left + plotWidth / 2, height - 14);
    context.save();
    context.translate(12, margin.top + plotHeight / 2);
    context.rotate(-Math.PI / 2);
    context.textBaseline = 'middle';
    context.fillText('loss (nats)', 0, 0);
    context.restore();
    // Training loss, every step.
    if (losses.length > 0) {
      context.strokeStyle = cssVar('--accent');
      context.lineWidth = 1.5;
      context.beginPath();
      losses.forEach((loss, i) => (i === 0 ? context.moveTo(x(i + 1), y(loss)) : context.lineTo(x(i + 1), y(loss))));
      context.stroke();
    }
    // Validation points.
    context.fillStyle = cssVar('--text');
    for (const [step, loss] of valLosses) {
      context.beginPath();
      context.arc(x(step), y(loss), 3.5, 0, 2 * Math.PI);
      context.fill();
    }
    canvas.dataset.points = String(losses.length);
    canvas.dataset.valPoints = String(valLosses.length);
    canvas.dataset.firstLoss = losses.length > 0 ? String(losses[0]) : '';
    canvas.dataset.lastLoss = losses.length > 0 ? String(losses.at(-1)) : '';
    canvas.setAttribute(
      'aria-label',
      losses.length === 0
        ? 'Loss curve: no steps yet'
        : `Loss curve over ${losses.length} steps: training loss from ${losses[0]!.toFixed(3)} to ${losses.at(-1)!.toFixed(3)}${valLosses.length > 0 ? `, validation loss ${valLosses.at(-1)![1].toFixed(3)} at step ${valLosses.at(-1)![0]}` : ''}`,
    );
  }
  const chartWidth = trackWidth(chartBox, draw);
  store.subscribe((_, changed) => {
    if (changed.has('theme')) draw();
  });
  lockSettings();
}
