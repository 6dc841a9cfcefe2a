// Dark or light: the reader's saved choice, else the system's. Canvas views repaint on change
// because their colormaps follow the theme.
export type Theme = 'dark' | 'light';

const STORAGE_KEY = 'gptlens-theme';

export function initialTheme(): Theme {
  const saved = localStorage.getItem(STORAGE_KEY);
  if (saved === 'dark' || saved === 'light') return saved;
  return matchMedia('(prefers-color-scheme: light)').matches ? 'light' : 'dark';
}

export function applyTheme(theme: Theme): void {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem(STORAGE_KEY, theme);
}
