// The machine a bench ran on, as a sceptic needs it: the CPU's name alone ("AMD EPYC") does not
// tell one generation from the next on a VM, so Linux's CPU family and model are added.
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

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
