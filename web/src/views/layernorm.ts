// Every normalisation site (ln1 and ln2 of each block, then the final one) for every token: heat
// strips of the scale (log colour) and the mean (diverging colour), tokens down, depth across,
// and a chart of the picked token's statistics through the depth with the other tokens faint.
import type { Analysis, NormSite } from '../analysis.ts';
import { Colormap, divergingMap, sequentialMap } from '../colormap.ts';
import { h, onWidthChange, tokenText } from '../dom.ts';
import { lineChart } from '../line-chart.ts';
import { MatrixCanvas } from '../matrix-canvas.ts';
import { touched, type State, type Store } from '../store.ts';
import { hideTooltip, showTooltip } from '../tooltip.ts';
import { colorbar } from './legend.ts';

type Statistic = 'scale' | 'mean';
type Normalise = 'site' | 'shared';

/** Where a value falls in [0, 1] for colouring: per site (column) or across all sites. */
function colorPositions(analysis: Analysis, statistic: Statistic, normalise: Normalise): (site: number, token: number) => number {
  const values = (site: NormSite) => (statistic === 'scale' ? site.scale.map(Math.log) : site.mean!);
  const columns = analysis.norms.map(values);
  const range = (column: Float32Array) =>
    statistic === 'scale'
      ? { low: Math.min(...column), high: Math.max(...column) }
      : { low: -Math.max(...column.map(Math.abs)), high: Math.max(...column.map(Math.abs)) };
  const ranges = columns.map(range);
  const shared = {
    low: Math.min(...ranges.map((r) => r.low)),
    high: Math.max(...ranges.map((r) => r.high)),
  };
  return (site, token) => {
    const { low, high } = normalise === 'shared' ? shared : ranges[site]!;
    return high > low ? (columns[site]![token]! - low) / (high - low) : 0.5;
  };
}

/** Labels under the depth axis: a few layers and the final site. */
function depthLabels(norms: NormSite[]): (string | undefined)[] {
  const layers = norms.filter((site) => site.layer !== undefined).length / 2;
  const every = layers <= 6 ? 1 : layers <= 16 ? 2 : 5;
  return norms.map((site, i) => {
    if (site.layer === undefined) return 'final';
    return i % 2 === 0 && site.layer % every === 0 ? `L${site.layer}` : undefined;
  });
}

export function mountLayerNorm(root: HTMLElement, store: Store): void {
  let normalise: Normalise = 'site';
  const normaliseSelect = h(
    'select',
    {
      'aria-label': 'Colour range',
      onchange: () => {
        normalise = normaliseSelect.value === 'shared' ? 'shared' : 'site';
        render(store.state);
      },
    },
    h('option', { value: 'site' }, 'colour per site'),
    h('option', { value: 'shared' }, 'one colour range'),
  );
  const subtitle = h('span', { class: 'muted' });
  const strips = h('div', { class: 'ln-strips' });
  const chartTitle = h('h3', {});
  const charts = h('div', { class: 'ln-charts' });
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'LayerNorm statistics'), subtitle, h('span', { class: 'spacer' }), normaliseSelect),
    strips,
    chartTitle,
    charts,
  );

  const pick = (token: number) => store.set({ query: store.state.query === token ? undefined : token });
  const strip = (statistic: Statistic) => {
    const canvas = new MatrixCanvas({
      hover: ({ row, col }, event) => {
        const analysis = store.state.analysis;
        const site = analysis?.norms[col];
        if (!analysis || !site) return;
        const mean = site.mean ? ` · mean ${site.mean[row]!.toPrecision(4)}` : '';
        showTooltip(event, [`scale ${site.scale[row]!.toPrecision(4)}${mean}`, `“${tokenText(analysis.labels[row]!)}” (${row}) at ${site.label}`]);
      },
      leave: hideTooltip,
      click: ({ row }) => pick(row),
    });
    const legend = h('span', {});
    const heading = h('h3', {});
    const element = h('figure', { class: 'ln-strip' }, h('figcaption', {}, heading, legend), canvas.element);
    return { statistic, canvas, legend, heading, element };
  };
  const scaleStrip = strip('scale');
  const meanStrip = strip('mean');
  strips.append(scaleStrip.element, meanStrip.element);

  const drawStrip = (view: ReturnType<typeof strip>, analysis: Analysis, state: Readonly<State>, width: number) => {
    const { statistic } = view;
    const sites = analysis.norms;
    const t = analysis.tokens.length;
    const colors: Colormap = statistic === 'scale' ? sequentialMap(state.theme) : divergingMap(state.theme);
    const position = colorPositions(analysis, statistic, normalise);
    view.heading.textContent = statistic === 'scale' ? 'scale  √(var + ε)' : 'mean';
    view.legend.replaceChildren(colorbar(colors, statistic === 'scale' ? 'low' : '−', statistic === 'scale' ? 'high (log)' : '+'));
    view.canvas.setData(
      {
        rows: t,
        cols: sites.length,
        width,
        maxCell: 24,
        cellHeight: t <= 24 ? 14 : Math.max(3, Math.floor(336 / t)),
        rowLabels: analysis.labels,
        colLabels: depthLabels(sites),
        paint: (image) => {
          const pixels = new Uint32Array(image.data.buffer);
          for (let token = 0; token < t; token++) {
            for (let site = 0; site < sites.length; site++) {
              pixels[token * sites.length + site] = colors.pixels[Colormap.index(position(site, token))]!;
            }
          }
        },
      },
      state.query,
    );
  };

  const render = (state: Readonly<State>) => {
    const analysis = state.analysis;
    const rms = analysis !== undefined && analysis.norms.every((site) => site.mean === undefined);
    subtitle.textContent = rms ? 'RMSNorm: scale = √(mean x² + ε), no mean' : 'per token, at every norm';
    if (!analysis) {
      strips.hidden = true;
      chartTitle.textContent = '';
      charts.replaceChildren(h('p', { class: 'empty-note' }, 'Type a prompt to see the statistics.'));
      return;
    }
    strips.hidden = false;
    const width = strips.clientWidth;
    const stripWidth = rms || width < 720 ? width : (width - 16) / 2;
    drawStrip(scaleStrip, analysis, state, stripWidth);
    meanStrip.element.hidden = rms;
    if (!rms) drawStrip(meanStrip, analysis, state, stripWidth);

    const token = state.query ?? analysis.tokens.length - 1;
    chartTitle.textContent = `Token ${token} “${tokenText(analysis.labels[token]!)}” through the depth`;
    const xLabels = depthLabels(analysis.norms);
    const others = (values: (site: NormSite) => Float32Array) =>
      analysis.labels.map((_, i) => analysis.norms.map((site) => values(site)[i]!)).filter((_, i) => i !== token);
    const chartWidth = rms || charts.clientWidth < 720 ? charts.clientWidth : (charts.clientWidth - 16) / 2;
    const scale = lineChart({
      width: chartWidth,
      height: 180,
      xLabels,
      log: true,
      yLabel: 'scale',
      context: others((site) => site.scale),
      emphasis: analysis.norms.map((site) => site.scale[token]!),
    });
    const mean = rms
      ? null
      : lineChart({
          width: chartWidth,
          height: 180,
          xLabels,
          log: false,
          yLabel: 'mean',
          context: others((site) => site.mean!),
          emphasis: analysis.norms.map((site) => site.mean![token]!),
        });
    charts.replaceChildren(...[scale, mean].filter((chart) => chart !== null));
  };

  onWidthChange(root, () => render(store.state));
  store.subscribe((state, changed) => {
    if (touched(changed, 'analysis', 'query', 'theme')) render(state);
  });
}
