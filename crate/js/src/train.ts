// Training in the engine: a byte-level (256-token) GPT-2-style model learns a text, a few steps
// per call, so the caller (a Worker answering a page) can report, pause and show the model
// between calls. `model()` is the model as it is now, for every view; `files()` is it as a
// Hugging Face GPT-2 folder (config.json + model.safetensors) that `Model.load`, the CLI and
// `transformers` read.
import { glue, type Glue } from './backend.js';
import * as check from './check.js';
import { guarded, intoEngine } from './crash.js';
import { Model } from './model.js';
import type { LoadOptions, ModelFiles, TrainProgress, TrainRecipe, TrainShape, TrainState } from './types.js';

type RawTrainer = Glue['Trainer']['prototype'];

export class Trainer {
  private readonly raw: RawTrainer;

  /**
   * A new model of `shape` (`{ nLayer, nHead, dModel, nCtx, sinusoidal? }`: positive integers,
   * `nCtx` ≤ 1024, `dModel` a multiple of `nHead`), initialised as GPT-2 is from `recipe.seed`;
   * `recipe`: any of the `TrainRecipe` fields (defaults: nanoGPT's character-level Shakespeare).
   * TypeError / RangeError for a bad argument; needs `init()`.
   */
  constructor(shape: TrainShape, recipe?: Partial<TrainRecipe>) {
    const checkedShape = check.trainShape(shape);
    const checkedRecipe = check.trainRecipe(recipe);
    this.raw = guarded(intoEngine(() => new (glue().Trainer)(checkedShape, checkedRecipe as Partial<TrainRecipe> | undefined)));
  }

  /**
   * The text to learn (a string, read as UTF-8, or bytes); its last `valFraction` (in [0, 1),
   * default 0.1) is held out for the validation loss. Both parts must be longer than `nCtx`.
   */
  setText(text: string | Uint8Array, valFraction = 0.1): void {
    this.raw.setText(check.trainText(text), check.valFraction(valFraction));
  }

  /**
   * Runs up to `steps` more steps (an integer ≥ 1; never past `recipe().steps`) and returns each
   * step's progress; `valLoss` is set on the steps that evaluate. Blocks while it runs.
   */
  train(steps: number): TrainProgress[] {
    return this.raw.train(check.trainSteps(steps));
  }

  /** Steps done, every training loss, and the validation losses as `[step, loss]` pairs. */
  state(): TrainState {
    return this.raw.state();
  }

  recipe(): TrainRecipe {
    return this.raw.recipe();
  }

  /**
   * The model as it is now (a copy: training on does not change it), with its byte tokenizer;
   * on the CPU, or on `options.backend` (then a Promise).
   */
  model(): Model;
  model(options: LoadOptions): Promise<Model>;
  model(options?: LoadOptions): Model | Promise<Model> {
    return Model.placed(this.raw.model(), options);
  }

  /** The model as files: `{ 'config.json', 'model.safetensors' }`, which `Model.load` reads. */
  files(): ModelFiles {
    return this.raw.files();
  }

  /** Parameters of the model. */
  paramCount(): number {
    return this.raw.paramCount();
  }

  free(): void {
    this.raw.free();
  }
}
