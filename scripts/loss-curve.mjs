// Draws a training run's loss curve as an SVG (the model card's figure): every step's training loss
// (faint) and its 100-step moving mean, the validation points, and a dashed line at the target.
//
//   node scripts/loss-curve.mjs RUN/training.json OUT.svg [--target 1.70]
import { readFileSync, writeFileSync } from 'node:fs';

const [input, output, ...rest] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node scripts/loss-curve.mjs RUN/training.json OUT.svg [--target LOSS]');
  process.exit(2);
}
const targetAt = rest.indexOf('--target');
const target = targetAt >= 0 ? Number(rest[targetAt + 1]) : 1.7;

const run = JSON.parse(readFileSync(input, 'utf8'));
const losses = run.state.losses;
const validation = run.state.valLosses;
if (!Array.isArray(losses) || losses.length === 0) throw new Error(`${input} records no losses`);

const WINDOW = 100;
const mean = losses.map((_, i) => {
  const from = Math.max(0, i - WINDOW + 1);
  const part = losses.slice(from, i + 1);
  return part.reduce((a, b) => a + b, 0) / part.length;
});

const [width, height] = [760, 380];
const margin = { left: 56, right: 16, top: 28, bottom: 44 };
const steps = losses.length;
const yMax = Math.ceil(Math.min(Math.max(...mean.slice(Math.min(50, steps - 1))), 3.0) * 2) / 2;
const yMin = Math.floor(Math.min(...mean, ...validation.map(([, v]) => v), target) * 10) / 10 - 0.1;
const x = (step) => margin.left + ((width - margin.left - margin.right) * step) / steps;
const y = (loss) => margin.top + ((height - margin.top - margin.bottom) * (yMax - Math.min(loss, yMax))) / (yMax - yMin);
// At most about 1,500 points a line: the figure is 700 pixels wide.
const thin = (points) => points.filter((_, i) => i % Math.ceil(points.length / 1500) === 0 || i === points.length - 1);
const path = (points) => points.map(([s, v], i) => `${i ? 'L' : 'M'}${x(s).toFixed(1)},${y(v).toFixed(1)}`).join('');

const parts = [];
for (let v = Math.ceil(yMin * 10) / 10; v <= yMax + 1e-9; v += 0.1) {
  const major = Math.abs(v * 2 - Math.round(v * 2)) < 1e-6;
  parts.push(`<line x1="${margin.left}" x2="${width - margin.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd" stroke-width="${major ? 1 : 0.5}"/>`);
  if (major) parts.push(`<text x="${margin.left - 6}" y="${y(v) + 4}" text-anchor="end">${v.toFixed(1)}</text>`);
}
const tick = steps > 8000 ? 2000 : steps > 2000 ? 1000 : Math.max(1, Math.round(steps / 8));
for (let s = 0; s <= steps; s += tick) {
  parts.push(`<text x="${x(s)}" y="${height - margin.bottom + 16}" text-anchor="middle">${s.toLocaleString('en')}</text>`);
}
parts.push(
  `<path d="${path(thin(losses.map((v, i) => [i + 1, v])))}" fill="none" stroke="#9ecae1" stroke-width="0.5"/>`,
  `<path d="${path(thin(mean.map((v, i) => [i + 1, v])))}" fill="none" stroke="#1f77b4" stroke-width="1.6"/>`,
  `<path d="${path(validation)}" fill="none" stroke="#d62728" stroke-width="1.4"/>`,
  ...validation.map(([s, v]) => `<circle cx="${x(s)}" cy="${y(v)}" r="2.5" fill="#d62728"/>`),
  `<line x1="${margin.left}" x2="${width - margin.right}" y1="${y(target)}" y2="${y(target)}" stroke="#2ca02c" stroke-dasharray="6 4"/>`,
  `<text x="${width - margin.right - 4}" y="${y(target) - 5}" text-anchor="end" fill="#2ca02c">target ${target.toFixed(2)}</text>`,
  `<text x="${(margin.left + width - margin.right) / 2}" y="${height - 8}" text-anchor="middle">step</text>`,
  `<text transform="translate(14 ${(margin.top + height - margin.bottom) / 2}) rotate(-90)" text-anchor="middle">loss (nats/byte)</text>`,
  `<text x="${margin.left}" y="18"><tspan fill="#1f77b4">training (${WINDOW}-step mean; faint: every step)</tspan>  <tspan fill="#d62728">validation</tspan></text>`,
);
const [lastStep, lastVal] = validation.at(-1) ?? [steps, NaN];
// Below the last point when above it would collide with the target's label.
const labelY = Math.abs(y(lastVal) - y(target)) < 16 ? y(lastVal) + 16 : y(lastVal) - 8;
parts.push(`<text x="${x(lastStep) - 4}" y="${labelY}" text-anchor="end" fill="#d62728">${lastVal.toFixed(3)}</text>`);
if (typeof run.held_out_loss === 'number') {
  parts.push(`<text x="${width - margin.right}" y="18" text-anchor="end" fill="#d62728">whole held-out part at the end: ${run.held_out_loss.toFixed(3)}</text>`);
}

writeFileSync(
  output,
  `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12" fill="#333">\n` +
    `<rect width="100%" height="100%" fill="#fff"/>\n${parts.join('\n')}\n</svg>\n`,
);
console.log(`wrote ${output} (${steps} steps, ${validation.length} validation points)`);
