import { APP_SCRIPT } from './app-script.js';
import { CHART_SCRIPT } from './chart-script.js';
import { MODERN_SCRIPT } from './modern-script.js';
import { PAGE_STYLE } from './style.js';

/**
 * The inspector page, compiled into the package as strings: the page works offline and needs nothing
 * but the inspector server that serves it (no CDN, no bundler, no files to copy at build time).
 */
export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcp-continuity inspector</title>
<link rel="stylesheet" href="/inspector.css">
</head>
<body>
<header>
  <h1>mcp-continuity inspector</h1>
  <span id="status" class="down">connecting</span>
  <span id="feeds"></span>
  <span id="marker-counts" class="dim"></span>
</header>
<section id="scrubber" hidden>
  <button id="scrub-prev" type="button" title="previous stop">&#9664;</button>
  <input id="scrub-range" type="range" min="0" max="0" value="0" aria-label="time in the trace">
  <button id="scrub-next" type="button" title="next stop">&#9654;</button>
  <span id="scrub-at"></span>
  <pre id="scrub-note"></pre>
</section>
<main>
  <div id="sessions">
    <div id="empty">Waiting for machines. Feed this page from your process:
      <code>createContinuityServer({ …, inspect: createInspectorFeed({ url: '<span id="feed-url"></span>' }).inspect })</code>
      (the same for <code>ContinuityClientTransport</code>, and on 2026-07-28 for <code>continuityFetch</code>
      and <code>createKeyedRequests</code>), or point @statelyai/inspect's
      <code>createWebSocketInspector</code> at that URL.</div>
  </div>
  <aside>
    <section id="markers"><h2>Gaps and outcome-unknown calls</h2><ul id="marker-list"></ul></section>
    <section id="figures"><h2>Metrics</h2><div id="figure-tables"></div>
      <p class="dim">Shown when a feed has <code>metrics</code> (ContinuityMetrics).</p></section>
    <section id="timeline"><h2>Timeline</h2>
      <label><input type="checkbox" id="show-chatter"> every event (each SSE event and cursor move)</label>
      <ol id="timeline-list"></ol></section>
  </aside>
</main>
<script src="/inspector.js"></script>
</body>
</html>
`;

export const PAGE_SCRIPT = `(function () {\n'use strict';\n${CHART_SCRIPT}\n${MODERN_SCRIPT}\n${APP_SCRIPT}\n})();\n`;

export { PAGE_STYLE };
