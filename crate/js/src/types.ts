// The plain data of the public API. They match the records the wasm bindings declare
// (crate/src/bindings), with hook names narrowed from `string` to `HookName`.

/** A TransformerLens-style hook name (see `ModelInfo.hooks` for the ones a given model offers). */
export type HookName =
  | `blocks.${number}.attn.hook_pattern`
  | `blocks.${number}.${'ln1' | 'ln2'}.${'hook_scale' | 'hook_mean'}`
  | `ln_final.${'hook_scale' | 'hook_mean'}`
  | `blocks.${number}.hook_resid_post.norm`
  | 'logits';

/** A captured tensor: row-major f32 values. Shapes: attention `[H, T, T]`, logits `[T, V]`, statistics `[T]`. */
export interface Tensor {
  shape: number[];
  data: Float32Array;
}

export interface ModelInfo {
  architecture: string;
  nLayer: number;
  nHead: number;
  /** Key/value heads: fewer than `nHead` under grouped-query attention (LLaMA). */
  nKvHead: number;
  dModel: number;
  dFf: number;
  vocabSize: number;
  /** Longest token sequence the model accepts (`n_positions`). */
  contextLength: number;
  nParams: number;
  /** Bytes the weights occupy in memory (quantized weights stay quantized). */
  memoryBytes: number;
  /** False when the checkpoint had no tokenizer files: use token ids then. */
  hasTokenizer: boolean;
  /** True when `chatPrompt` can wrap text in the model's chat template (e.g. ChatML). */
  hasChatTemplate: boolean;
  /** The token that ends a sequence: generation should stop there. */
  eosTokenId?: number;
  bosTokenId?: number;
  /** Every hook this model can capture, layer by layer. */
  hooks: HookName[];
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
}
