// The machine and the build a bench ran on, as a sceptic needs them: the CPU's name alone ("AMD
// EPYC") does not tell one generation from the next on a VM, so Linux's CPU family and model are
// added; and a figure is only comparable with another of the same source.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

/** "AMD EPYC (family 25, model 17)"; the name alone where /proc/cpuinfo is not there. */
export function cpuName() {
  const name = cpus()[0]?.model ?? 'unknown CPU';
  let info = '';
  try {
    info = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return name;
  }
  const field = (label) => info.match(new RegExp(`^${label}\\s*:\\s*(.+)$`, 'm'))?.[1]?.trim();
  const [family, model] = [field('cpu family'), field('model')];
  return family && model ? `${name} (family ${family}, model ${model})` : name;
}

/** "d99a873", or "d99a873 with uncommitted changes"; "an unknown build" outside a git checkout. */
export function sourceVersion() {
  const git = (...args) => execFileSync('git', args, { cwd: fileURLToPath(new URL('../..', import.meta.url)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const commit = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') === '' ? commit : `${commit} with uncommitted changes`;
  } catch {
    return 'an unknown build';
  }
}
