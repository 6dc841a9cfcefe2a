// The models the server offers (web/server/model-catalog.ts writes /models/index.json).

export interface CatalogModel {
  /** Stable key, also the page's `?model=` parameter: `assets/<file or folder>` or `fixtures/<folder>`. */
  id: string;
  name: string;
  /** `fixture`: a tiny random-weight test model from tests/fixtures. */
  kind: 'model' | 'fixture';
  bytes: number;
  /**
   * The terms a model is used under when they are not an open-source license (Gemma: "Gemma
   * Terms of Use"), from a `<file>.license` text beside it; the page shows it in the list.
   */
  license?: string;
  /** File name (as the engine expects it) → URL. */
  files: Record<string, string>;
  /** An encoder (BERT: bidirectional attention, no next token): the page shows sentence similarity for it. */
  encoder?: boolean;
  /** Why a model the page knows of cannot be loaded here (its folder was not fetched); listed, not selectable. */
  unavailable?: string;
}

export interface Catalog {
  models: CatalogModel[];
}

/** The server's list, or an empty one where the page is hosted without it (a static copy of dist/). */
export async function fetchCatalog(): Promise<Catalog> {
  try {
    const response = await fetch('/models/index.json');
    return response.ok ? ((await response.json()) as Catalog) : { models: [] };
  } catch {
    return { models: [] };
  }
}

/**
 * The model gptlens trained and ships in the repository (assets/models/gptlens-shakespeare: 3.4 MB,
 * no download), which a first visit opens.
 */
export const SHIPPED_MODEL = 'assets/gptlens-shakespeare';

/**
 * The `?model=` choice if listed (and there), else the shipped model, else the first real decoder,
 * else the first real model, else the GPT-2 fixture, else anything that can be loaded.
 */
export function defaultModel(catalog: Catalog, requested: string | null): CatalogModel | undefined {
  const models = catalog.models.filter((model) => model.unavailable === undefined);
  return (
    models.find((model) => model.id === requested) ??
    models.find((model) => model.id === SHIPPED_MODEL) ??
    models.find((model) => model.kind === 'model' && !model.encoder) ??
    models.find((model) => model.kind === 'model') ??
    models.find((model) => model.id === 'fixtures/gpt2-tiny-f32') ??
    models[0]
  );
}
