// Every normalisation site (ln1 and ln2 of each block, then the final one) for every token: heat
// strips of the scale (log colour) and the mean (diverging colour), tokens down, depth across,
// and a chart of the picked token's statistics through the depth with the other tokens faint.
import type { Analysis, NormSite } from '../analysis.ts';
import { Colormap, divergingMap, sequentialMap } from '../colormap.ts';
import { drawnWhenSeen, h, morphChildren, setAttribute, setHidden, setText, tokenText, trackWidth } from '../dom.ts';
import { lineChart } from '../line-chart.ts';
import { MatrixCanvas } from '../matrix-canvas.ts';
import { downloadCanvas, downloadCsv, downloadSvg, exportButton, howTo } from '../panel-tools.ts';
import { touched, type State, type Store } from '../store.ts';
import { hideTooltip, showTooltip } from '../tooltip.ts';
import { colorbar } from './legend.ts';

const NORMS_PRE =
  'Before each attention block (ln1), each MLP (ln2) and the output (final), every token’s vector x is normalised: divided by its scale, then multiplied by learned weights.';
const NORMS_POST =
  'This model normalises after each sublayer (post-LN, as BERT does): ln1 is the norm of x + attention, ln2 that of x + MLP, and there is no final norm. Every token’s vector is divided by its scale, then multiplied by learned weights.';

type Statistic = 'scale' | 'mean';
type Normalise = 'site' | 'shared';

/**
 * Where a value falls in [0, 1] for colouring: per site (column) or across all sites. The ranges
 * leave out the first token (when there are others): its scale is often hundreds of times the
 * rest (the attention sink) and would leave every other cell pale; it saturates instead.
 */
function colorPositions(analysis: Analysis, statistic: Statistic, normalise: Normalise): (site: number, token: number) => number {
  const values = (site: NormSite) => (statistic === 'scale' ? site.scale.map(Math.log) : site.mean!);
  const columns = analysis.norms.map(values);
  const range = (all: Float32Array) => {
    const column = all.length > 1 ? all.subarray(1) : all;
    // Folds, not Math.min(...column): a long prompt has more positions than a call takes arguments.
    if (statistic === 'scale') return { low: column.reduce((a, b) => Math.min(a, b), Infinity), high: column.reduce((a, b) => Math.max(a, b), -Infinity) };
    const top = column.reduce((a, b) => Math.max(a, Math.abs(b)), -Infinity);
    return { low: -top, high: top };
  };
  const ranges = columns.map(range);
  const shared = {
    low: Math.min(...ranges.map((r) => r.low)),
    high: Math.max(...ranges.map((r) => r.high)),
  };
  return (site, token) => {
    const { low, high } = normalise === 'shared' ? shared : ranges[site]!;
    return high > low ? Math.min(1, Math.max(0, (columns[site]![token]! - low) / (high - low))) : 0.5;
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
      onchange: () => {
        normalise = normaliseSelect.value === 'shared' ? 'shared' : 'site';
        redrawHead(); // its legend's note
        redrawStrips();
      },
    },
    h('option', { value: 'site' }, 'colour per site'),
    h('option', { value: 'shared' }, 'one colour range'),
  );
  normaliseSelect.title = 'Per site: each column’s colours span its own range; one range: all columns share one. Either way the first token is left out of the range.';
  const tableToggle = h('button', {
    type: 'button',
    class: 'quiet',
    'data-testid': 'norm-table-toggle',
    'aria-pressed': 'false',
    title: 'Show the statistics as a table of numbers',
    onclick: () => store.set({ normTable: !store.state.normTable }),
  }, 'Show as table');
  const heading = h('h2', {}, 'LayerNorm statistics');
  const subtitle = h('span', { class: 'muted' });
  const legendNote = h('p', { class: 'muted legend-note' });
  const sinkNote = h('p', { class: 'sink-note', 'data-testid': 'norm-sink-note', hidden: true });
  const strips = h('div', { class: 'ln-strips' });
  const table = h('div', { class: 'ln-table', 'data-testid': 'norm-table', hidden: true, tabindex: 0 });
  const chartTitle = h('h3', {});
  const charts = h('div', { class: 'ln-charts' });
  // The strips (or the table) and the chart are each drawn when seen: the panel's head is often on
  // screen with its body below the fold, and drawing the body took ~1.2 ms of the keystroke's frame.
  const stripsBox = h('div', { 'data-testid': 'norm-strips' }, strips, table);
  const chartBox = h('div', { class: 'ln-depth', 'data-testid': 'norm-chart' }, chartTitle, charts);
  const formulas = h('div', {});
  const placement = h('p', {}, NORMS_PRE);
  const help = howTo(
    'norms',
    placement,
    formulas,
    'Rows are tokens, columns the norms in depth order. A large scale means a large residual stream for that token at that depth. Pick a token to follow it through the depth in the chart below.',
  );
  const csv = exportButton('CSV', 'Download every token’s statistics at every norm as CSV', () => exportCsv(store.state));
  // The strips and the chart may wait to be drawn (below the fold): drawn first, they save what is due.
  const png = exportButton('PNG', 'Download the scale strip as PNG', () => {
    redrawStrips.now();
    downloadCanvas('gptlens-norm-scale.png', scaleStrip.canvas.element);
  });
  const svg = exportButton('SVG', 'Download the chart through the depth as SVG', () => {
    redrawChart.now();
    const chart = charts.querySelector('svg');
    if (chart) downloadSvg('gptlens-norm-depth.svg', chart);
  });
  root.append(
    h('header', { class: 'panel-head' }, heading, subtitle, h('span', { class: 'spacer' }), h('label', { class: 'inline-label' }, h('span', { class: 'visually-hidden' }, 'Colour range'), normaliseSelect), tableToggle, png, svg, csv, help.toggle),
    help.note,
    sinkNote,
    legendNote,
    stripsBox,
    chartBox,
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
    }, { growsWithPrompt: true });
    const legend = h('span', {});
    const heading = h('h3', {});
    const element = h('figure', { class: 'ln-strip' }, h('figcaption', {}, heading, legend), canvas.box);
    return { statistic, canvas, legend, heading, element };
  };
  const scaleStrip = strip('scale');
  const meanStrip = strip('mean');
  strips.append(scaleStrip.element, meanStrip.element);

  const drawStrip = (view: ReturnType<typeof strip>, analysis: Analysis, state: Readonly<State>, width: number, rms: boolean) => {
    const { statistic } = view;
    const sites = analysis.norms;
    const t = analysis.tokens.length;
    const colors: Colormap = statistic === 'scale' ? sequentialMap(state.theme) : divergingMap(state.theme);
    const position = colorPositions(analysis, statistic, normalise);
    setText(view.heading, statistic === 'scale' ? (rms ? 'scale  √(mean x² + ε)' : 'scale  √(var x + ε)') : 'mean');
    morphChildren(view.legend, [colorbar(colors, statistic === 'scale' ? 'low' : '−', statistic === 'scale' ? 'high (log)' : '+')]);
    setAttribute(view.canvas.element, 'role', 'img');
    setAttribute(view.canvas.element, 'aria-label', describeStrip(analysis, statistic));
    view.canvas.setData(
      {
        rows: t,
        cols: sites.length,
        width,
        maxCell: 24,
        // Past 24 tokens the rows share 336 px, some a pixel taller than others: whole rows made the
        // strip 312–336 px from one token to the next, and everything under it moved as one typed.
        cellHeight: t <= 24 ? 14 : Math.max(3, 336 / t),
        rowLabels: analysis.labels,
        colLabels: depthLabels(sites),
        paint: (image) => {
          const pixels = new Int32Array(image.data.buffer);
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

  const isRms = (analysis: Analysis | undefined) => analysis !== undefined && analysis.norms.every((site) => site.mean === undefined);

  const renderHead = (state: Readonly<State>) => {
    const analysis = state.analysis;
    const rms = isRms(analysis);
    setText(heading, rms ? 'RMSNorm statistics' : 'LayerNorm statistics');
    const post = state.model?.engine.info.normPlacement === 'post' ? ' · post-LN: after each sublayer' : '';
    setText(subtitle, (rms ? 'RMSNorm: scale = √(mean x² + ε), no mean' : 'LayerNorm: scale = √(var x + ε), mean = mean x') + post);
    morphChildren(formulas, [
      rms
        ? h('p', {}, 'This model uses RMSNorm: y = x / √(mean(x²) + ε) · g. The scale is √(mean(x²) + ε), the root mean square of the vector; nothing is subtracted, so there is no mean to show.')
        : h('p', {}, 'This model uses LayerNorm: y = (x − mean x) / √(var x + ε) · g + b. The mean is the average of the vector’s entries (subtracted first); the scale is √(var x + ε), its standard deviation.'),
    ]);
    setText(legendNote, `${normalise === 'site' ? 'Each column’s colours span that norm’s own range' : 'All columns share one colour range'}, computed without the first token (which often dwarfs the rest and then shows at full colour).`);
    setAttribute(tableToggle, 'aria-pressed', String(state.normTable));
    setText(tableToggle, state.normTable ? 'Show as strips' : 'Show as table');
    const ratio = analysis ? sinkRatio(analysis) : 0;
    setHidden(sinkNote, ratio < 5);
    if (analysis) setText(sinkNote, `The first token “${tokenText(analysis.labels[0]!)}” has a scale ${ratio.toFixed(0)}× the others’ median at some norms. That is the attention sink: the model blows up the first position’s residual stream so that heads with nothing to read can park their attention there harmlessly.`);
  };

  const renderStrips = (state: Readonly<State>) => {
    const analysis = state.analysis;
    if (!analysis) {
      setHidden(table, true);
      setHidden(strips, true);
      return;
    }
    const rms = isRms(analysis);
    setHidden(strips, state.normTable);
    setHidden(table, !state.normTable);
    if (state.normTable) {
      table.replaceChildren(statisticsTable(analysis, state.query, rms));
    } else {
      const width = stripsWidth();
      const stripWidth = rms || width < 720 ? width : (width - 16) / 2;
      drawStrip(scaleStrip, analysis, state, stripWidth, rms);
      setHidden(meanStrip.element, rms);
      if (!rms) drawStrip(meanStrip, analysis, state, stripWidth, rms);
    }
  };

  const renderChart = (state: Readonly<State>) => {
    const analysis = state.analysis;
    if (!analysis) {
      setText(chartTitle, '');
      morphChildren(charts, [h('p', { class: 'empty-note' }, 'Type a prompt to see the statistics.')]);
      return;
    }
    const rms = isRms(analysis);
    const token = state.query ?? analysis.tokens.length - 1;
    setText(chartTitle, `Token ${token} “${tokenText(analysis.labels[token]!)}” through the depth`);
    const xLabels = depthLabels(analysis.norms);
    const others = (values: (site: NormSite) => Float32Array) =>
      analysis.labels.map((_, i) => analysis.norms.map((site) => values(site)[i]!)).filter((_, i) => i !== token);
    const chartsWidth = chartsBoxWidth();
    const chartWidth = rms || chartsWidth < 720 ? chartsWidth : (chartsWidth - 16) / 2;
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
    const picked = `“${tokenText(analysis.labels[token]!)}”`;
    const values = analysis.norms.map((site) => `${site.label} ${site.scale[token]!.toPrecision(3)}`).join(', ');
    scale.setAttribute('aria-label', `Scale of token ${token} ${picked} through the depth (log axis; the other tokens faint): ${values}`);
    mean?.setAttribute('aria-label', `Mean of token ${token} ${picked} through the depth: ${analysis.norms.map((site) => `${site.label} ${site.mean![token]!.toPrecision(3)}`).join(', ')}`);
    charts.replaceChildren(...[scale, mean].filter((chart) => chart !== null));
  };

  const redrawHead = drawnWhenSeen(root, () => renderHead(store.state));
  const redrawStrips = drawnWhenSeen(stripsBox, () => renderStrips(store.state));
  const redrawChart = drawnWhenSeen(chartBox, () => renderChart(store.state));
  const stripsWidth = trackWidth(strips, redrawStrips);
  const chartsBoxWidth = trackWidth(charts, redrawChart);
  store.subscribe((_, changed) => {
    if (touched(changed, 'analysis', 'query', 'theme', 'normTable', 'model')) {
      redrawHead();
      redrawStrips();
      redrawChart();
    }
    if (touched(changed, 'model')) placement.textContent = store.state.model?.engine.info.normPlacement === 'post' ? NORMS_POST : NORMS_PRE;
  });
}

/** The largest ratio, over norms, of the first token's scale to the median of the others'. */
function sinkRatio(analysis: Analysis): number {
  if (analysis.tokens.length < 3) return 0;
  let ratio = 0;
  for (const site of analysis.norms) {
    const others = [...site.scale.subarray(1)].sort((a, b) => a - b);
    const median = others[Math.floor(others.length / 2)]!;
    if (median > 0) ratio = Math.max(ratio, site.scale[0]! / median);
  }
  return ratio;
}

/** Text alternative of a strip: its shape and its extremes. */
function describeStrip(analysis: Analysis, statistic: Statistic): string {
  let best = { value: -Infinity, token: 0, site: '' };
  for (const site of analysis.norms) {
    const values = statistic === 'scale' ? site.scale : site.mean!;
    values.forEach((value, token) => {
      const size = Math.abs(value);
      if (size > best.value) best = { value: size, token, site: site.label };
    });
  }
  return `${statistic} of ${analysis.tokens.length} tokens (rows) at ${analysis.norms.length} norms (columns). Largest ${statistic === 'scale' ? '' : 'in size '}: token ${best.token} “${tokenText(analysis.labels[best.token]!)}” at ${best.site}, ${best.value.toPrecision(4)}. Use “Show as table” for every number.`;
}

/** Every token's scale (and mean) at every norm. */
function statisticsTable(analysis: Analysis, query: number | undefined, rms: boolean): HTMLElement {
  const sites = analysis.norms;
  return h(
    'table',
    { class: 'numbers' },
    h('caption', {}, rms ? 'Scale √(mean x² + ε) of each token at each norm' : 'Scale √(var x + ε) / mean of each token at each norm'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'token'), ...sites.map((site) => h('th', { scope: 'col' }, site.label)))),
    h(
      'tbody',
      {},
      ...analysis.labels.map((label, token) =>
        h(
          'tr',
          { class: token === query ? 'picked' : undefined },
          h('th', { scope: 'row' }, `${token} “${tokenText(label)}”`),
          ...sites.map((site) => h('td', {}, site.mean ? `${site.scale[token]!.toPrecision(3)} / ${site.mean[token]!.toPrecision(2)}` : site.scale[token]!.toPrecision(3))),
        ),
      ),
    ),
  );
}

function exportCsv({ analysis }: Readonly<State>): void {
  if (!analysis) return;
  const rows: (string | number)[][] = [['position', 'token', 'site', 'scale', 'mean']];
  analysis.labels.forEach((label, token) => {
    for (const site of analysis.norms) rows.push([token, label, site.label, site.scale[token]!, site.mean ? site.mean[token]! : '']);
  });
  downloadCsv('gptlens-norms.csv', rows);
}
