// Sentence similarity for encoders (all-MiniLM-L6-v2): the prompt's sentence embedding against a
// second sentence and a few fixed ones, by cosine similarity. The page's state holds the result.

/** The second sentence the similarity panel starts with. */
export const DEFAULT_SECOND = 'A man plays a guitar on stage.';

/** The prompt an encoder opens on when the prompt is still the page's (a decoder's) default. */
export const ENCODER_PROMPT = 'A man is playing a guitar.';

/** The sentences ranked by their similarity to the prompt. */
export const RANKED_SENTENCES: readonly string[] = [
  'Someone is playing an instrument.',
  'A woman is slicing tomatoes in the kitchen.',
  'The stock market fell sharply this morning.',
  'A musician performs a song for the crowd.',
  'Where can I buy fresh bread near here?',
  'A child is riding a bicycle in the park.',
];

export interface Similarity {
  /** The texts compared (the prompt box's, the second sentence box's) when this was computed. */
  prompt: string;
  second: string;
  /** Cosine similarity of the two sentence embeddings; undefined when they could not be embedded. */
  score: number | undefined;
  /** `RANKED_SENTENCES` by similarity to the prompt, most similar first. */
  ranked: { text: string; score: number }[];
  /** Why nothing could be computed (a prompt too long, ids out of range). */
  error: string | undefined;
}
