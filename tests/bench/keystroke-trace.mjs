// LIVE_TRACE=1 (npm run bench:live): one more typing run per model with Chromium's tracing on,
// which splits each keystroke's frame — the frame that holds the page's views, inside the
// keystroke's measure — into the browser's phases, and names the tasks that run after that frame
// and before the page's measure of the paint ends. Tracing slows every part: these figures say
// where the untraced ones go, they are not comparable with them.

const CATEGORIES = ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'blink', 'cc', 'toplevel', 'blink.user_timing'];

/** The frame's phases, by the trace event that times each (label, event). */
export const PHASES = [
  ["animation-frame callbacks: the answer's wait and the views' script", 'FireAnimationFrame'],
  ['hover update after a layout under the pointer (a hit test)', 'EventHandler::handleMouseMoveEvent'],
  ['style', 'Blink.Style.UpdateTime'],
  ['layout', 'Blink.Layout.UpdateTime'],
  ['pre-paint', 'Blink.PrePaint.UpdateTime'],
  ['paint', 'Blink.Paint.UpdateTime'],
  ['layerize', 'Layerize'],
  ['commit to the compositor', 'Commit'],
];

/** Starts tracing `page`; returns a function that stops it and resolves to the keystrokes' frames. */
export async function startTrace(page) {
  const cdp = await page.context().newCDPSession(page);
  const events = [];
  cdp.on('Tracing.dataCollected', ({ value }) => events.push(...value));
  await cdp.send('Tracing.start', { traceConfig: { includedCategories: CATEGORIES }, transferMode: 'ReportEvents' });
  return async () => {
    const complete = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve));
    await cdp.send('Tracing.end');
    await complete;
    await cdp.detach();
    return keystrokeFrames(events);
  };
}

/** Per keystroke measure: the phases of the last frame to begin inside it, and what ran after that frame. */
function keystrokeFrames(events) {
  const thread = (event) => `${event.pid}:${event.tid}`;
  // The page's main thread: the one that runs its animation-frame callbacks.
  const main = events.find((event) => event.name === 'FireAnimationFrame');
  if (!main) return [];
  const mine = events.filter((event) => thread(event) === thread(main) && event.ph === 'X' && event.dur);
  const frames = mine.filter((event) => event.name === 'ProxyMain::BeginMainFrame');
  const tasks = mine.filter((event) => event.name === 'ThreadControllerImpl::RunTask');
  const marks = events.filter((event) => event.name === 'gptlens:keystroke→redraw' && (event.ph === 'b' || event.ph === 'e')).sort((a, b) => a.ts - b.ts);
  const measures = [];
  let begin;
  for (const mark of marks) {
    if (mark.ph === 'b') begin = mark.ts;
    else if (begin !== undefined) measures.push({ begin, end: mark.ts }), (begin = undefined);
  }
  const within = (inner, outer) => inner.ts >= outer.ts && inner.ts + inner.dur <= outer.ts + outer.dur;
  return measures.flatMap(({ begin, end }) => {
    const frame = frames.filter((candidate) => candidate.ts >= begin && candidate.ts <= end).at(-1);
    if (!frame) return [];
    const inside = mine.filter((event) => within(event, frame));
    const hovers = inside.filter((event) => event.name === 'EventHandler::handleMouseMoveEvent');
    const phases = PHASES.map(([, name]) => {
      // Once each: not inside another of its kind, nor (but for the hover itself) inside the hover's hit test.
      const own = inside.filter((event) => event.name === name && !inside.some((outer) => outer !== event && outer.name === name && within(event, outer)));
      const counted = name === 'EventHandler::handleMouseMoveEvent' ? own : own.filter((event) => !hovers.some((hover) => within(event, hover)));
      return counted.reduce((sum, event) => sum + event.dur / 1000, 0);
    });
    const frameEnd = frame.ts + frame.dur;
    const after = new Map();
    for (const task of tasks.filter((candidate) => candidate.ts >= frameEnd && candidate.ts < end)) {
      const source = task.args?.src_func ?? 'other';
      after.set(source, (after.get(source) ?? 0) + task.dur / 1000);
    }
    return [{ toFrame: (frame.ts - begin) / 1000, frame: frame.dur / 1000, phases, afterFrame: (end - frameEnd) / 1000, after }];
  });
}
