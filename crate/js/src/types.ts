// The plain data of the public API. The engine's records are declared once, in the wasm
// bindings (crate/src/bindings/mod.rs, TYPES); this file re-exports them, with hook names narrowed
// from `string` to `HookName`, and declares what only this package makes.
import type {
  AdapterInfo,
  Attribution,
  HeadScores,
  LogitLens,
  ModelInfo as EngineModelInfo,
  PatchScores,
  TrainAdamW,
  TrainProgress,
  TrainRecipe,
  TrainShape,
  TrainState,
} from '../wasm/st/gptlens.js';

export type { AdapterInfo, Attribution, HeadScores, LogitLens, PatchScores, TrainAdamW, TrainProgress, TrainRecipe, TrainShape, TrainState };

/** A TransformerLens-style hook name (see `ModelInfo.hooks` for the ones a given model offers). */
export type HookName =
  | `blocks.${number}.attn.hook_pattern`
  | `blocks.${number}.attn.hook_pattern.pooled`
  | `blocks.${number}.${'ln1' | 'ln2'}.${'hook_scale' | 'hook_mean'}`
  | `ln_final.${'hook_scale' | 'hook_mean'}`
  | `blocks.${number}.hook_resid_post.norm`
  | 'logits'
  | `blocks.${number}.${'hook_resid_pre' | 'hook_resid_mid' | 'hook_resid_post' | 'hook_mlp_out'}`
  | `blocks.${number}.attn.${'hook_z' | 'hook_result'}`
  | 'lens.logits';

/** A captured tensor: row-major f32 values. Shapes: attention `[H, T, T]`, logits `[T, V]`, statistics `[T]`. */
export interface Tensor {
  shape: number[];
  data: Float32Array;
}

/** Hyperparameters, size and hooks of a model (declared with the engine's records in crate/src/bindings). */
export interface ModelInfo extends Omit<EngineModelInfo, 'hooks' | 'standardHooks'> {
  /** Every hook this model can capture: the standard set, then the activations recorded only when named. */
  hooks: HookName[];
  /** The hooks a run records when none are named. */
  standardHooks: HookName[];
}

/** A part of the model to ablate: head `[layer, head]`, or the whole MLP of a layer `[layer, 'mlp']`. */
export type AblationUnit = readonly [layer: number, unit: number | 'mlp'];

/** What ablated units output: zero, or their mean over the prompt's positions in the run without ablation. */
export type AblateWith = 'zero' | 'mean';

/** `Model.patch`'s question: two prompts of the same length and the two tokens whose logit difference is measured. */
export interface PatchRequest {
  clean: Uint32Array | readonly number[];
  corrupt: Uint32Array | readonly number[];
  answer: number;
  wrong: number;
}

export interface LogitLensOptions {
  /** First position read (default 0). */
  first?: number | undefined;
  /** Tokens listed per layer and position (default 5). */
  k?: number | undefined;
  /** A token whose probability is followed through the layers too. */
  target?: number | undefined;
  ablate?: readonly AblationUnit[] | undefined;
  ablateWith?: AblateWith | undefined;
  /** Follows its steps (the run, then each layer); `false` stops it (an Error saying "cancelled"). */
  onProgress?: ((done: number, total: number) => boolean | void) | undefined;
}

export interface AttributionOptions {
  /** Default: the last position. */
  position?: number | undefined;
  /** Default: the model's top token at `position`. */
  answer?: number | undefined;
  /** Default: the model's second token there. */
  wrong?: number | undefined;
  ablate?: readonly AblationUnit[] | undefined;
  ablateWith?: AblateWith | undefined;
}

/** Where a model's forward passes run. `auto`: WebGPU on a hardware adapter, else the CPU. */
export type BackendChoice = 'auto' | 'cpu' | 'webgpu';

/**
 * A GPU adapter: the engine's `AdapterInfo` (its limits are the device's: the adapter's own, not
 * WebGPU's defaults) completed with what the browser's `GPUAdapterInfo` says.
 */
export interface GpuAdapterInfo extends AdapterInfo {
  /** The browser's vendor name, e.g. "google", "nvidia", "apple". */
  vendor: string;
  /** The browser's architecture name, e.g. "swiftshader", "ampere", "common-3". */
  architecture: string;
  /** The browser's `isFallbackAdapter`: a software implementation such as SwiftShader. */
  isFallbackAdapter: boolean;
}

/** Which backend a model runs on, and why. */
export interface BackendInfo {
  backend: 'cpu' | 'webgpu';
  /** What was asked for at load. */
  requested: BackendChoice;
  /** One sentence, e.g. "cpu: the only WebGPU adapter (google swiftshader) is a software fallback…". */
  reason: string;
  /** The adapter WebGPU offered, also when `auto` declined it; absent when there was none. */
  adapter?: GpuAdapterInfo;
}

/**
 * The snapshot of a .gguf model's weights that a worker keeps in the origin-private file system
 * (`GptlensWorker.loadGguf`'s `snapshotKey`), for the model it holds.
 */
export interface SnapshotState {
  /**
   * `none`: no snapshot was asked for, or none could be used and none is being written;
   * `restored`: the model was loaded from its snapshot; `writing`: its snapshot is being written
   * between requests; `kept`: written; `failed`: writing it failed (`why`); `deleted`: deleted
   * by `deleteSnapshots` (the model stays; its next load reads the file).
   */
  state: 'none' | 'restored' | 'writing' | 'kept' | 'failed' | 'deleted';
  /** The key the snapshot is kept under. */
  key?: string;
  /** Why the model was not loaded from a snapshot, when one was looked for. */
  missed?: string | undefined;
  /** Why writing the snapshot failed. */
  why?: string;
}

/** A snapshot kept in this browser's origin-private file system (`GptlensWorker.listSnapshots`). */
export interface SnapshotEntry {
  /** Its file's name: what `deleteSnapshots` takes. */
  id: string;
  /** The key it was written under (`loadGguf`'s `snapshotKey`); absent if none was recorded. */
  key: string | undefined;
  /** Its size; absent while it is being written, or another tab holds it open. */
  bytes: number | undefined;
  /** When it was last written, in ms since 1970 (the time of the list, for one being written or held open by another tab). */
  written: number;
  /** Why a load with its key could not use it now (being written, cut short, written by another version of gptlens); absent when it could. */
  unusable: string | undefined;
  /** It is the snapshot of the model the asking worker holds (loaded from it, or written for it). */
  current: boolean;
}

/** The snapshots kept in this browser, newest first, and what the origin stores in all. */
export interface Snapshots {
  entries: SnapshotEntry[];
  /** Bytes this origin stores (snapshots, caches, other storage), per `navigator.storage.estimate()`; absent where the browser does not say. */
  usedBytes: number | undefined;
  /** Bytes the browser lets this origin store; absent where it does not say. */
  quotaBytes: number | undefined;
}

export interface LoadOptions {
  /** Default `cpu` (what the synchronous `Model.load(files)` does). */
  backend?: BackendChoice;
}

/** `temperature: 0` is greedy. `topK` / `topP` restrict sampling to the most probable tokens. */
export interface SamplingParams {
  temperature: number;
  topK?: number;
  topP?: number;
}

export interface TokenProb {
  id: number;
  prob: number;
}

/**
 * What `WorkerSession.runPrompt` computes besides the run itself, so that a live view gets
 * everything for one edit of its prompt in one message to the Worker.
 */
export interface PromptQuery {
  /** Hooks to capture, as `run` takes them (default: every hook). */
  capture?: readonly HookName[] | undefined;
  /**
   * Past this many tokens, each `blocks.{l}.attn.hook_pattern` asked for in `capture` is captured
   * pooled instead (`hook_pattern.pooled`), the session keeps its queries (CPU; see
   * `keepQueries`) and `open`'s head comes whole in the answer: every head's whole map of a long
   * prompt would not fit in memory. Default: never.
   */
  pooledPast?: number | undefined;
  /** The head whose whole map a pooled run answers with (`opened`). */
  open?: { layer: number; head: number } | undefined;
  /** The next token's candidates (`PromptNext`). Not for encoders. */
  next?: NextQuery | undefined;
}

/**
 * The `k` most probable next tokens (with their strings), and the candidates `sampling` keeps,
 * up to `survivors` (default 1000): how many, and (unless `kept` is false) which.
 */
export interface NextQuery {
  k: number;
  sampling?: SamplingParams | undefined;
  survivors?: number | undefined;
  kept?: boolean | undefined;
}

/** The next-token part of a `PromptAnswer`. */
export interface PromptNext {
  /**
   * The `k` most probable next tokens at temperature 1, unfiltered, each with its string (none
   * without a tokenizer) and `sampled`, its probability under `sampling` (absent when `sampling`
   * filters it out, or when it is not among the first `survivors` kept).
   */
  top: (TokenProb & { label: string | undefined; sampled?: number })[];
  /** How many tokens `sampling` keeps, counted up to `survivors`. */
  survivors: number;
  /**
   * The tokens `sampling` keeps, most probable first, with their probabilities under it (at most
   * `survivors`). Left out when the query's `next.kept` is false: a view that shows only `top` and
   * the count is spared making, sending and reading a thousand objects on every keystroke.
   */
  kept?: TokenProb[];
}

/** Where the Worker's time for a `runPrompt` went, in milliseconds (measured in the Worker). */
export interface PromptTimings {
  tokenize: number;
  forward: number;
  next: number;
}

/** Checkpoint files by name: `config.json`, one `*.safetensors`, optionally `tokenizer.json` or `vocab.json` + `merges.txt`. */
export type ModelFiles = Record<string, Uint8Array>;

/** Which WebAssembly build runs, and why that one. */
export interface Backend {
  simd: boolean;
  /** Threads doing the work: 1 for the single-thread build. */
  threads: number;
  /** One human-readable sentence, e.g. "single-thread: page is not crossOriginIsolated". */
  reason: string;
}

export interface InitOptions {
  /**
   * Threads for the threaded build. Default: `navigator.hardwareConcurrency`. 1 forces the
   * single-thread build. Ignored where threads cannot run (Node, a page's main thread, a page
   * that is not cross-origin isolated); `backend().reason` then says so.
   */
  threads?: number;
  /**
   * The backend models will be loaded with. Only the single-thread build has WebGPU, so `webgpu`
   * loads it, and so does `auto` when WebGPU offers a hardware adapter. Default `cpu`: the build
   * is chosen for the CPU alone.
   */
  backend?: BackendChoice;
}
