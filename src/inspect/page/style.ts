/** The inspector page's stylesheet (served as /inspector.css). Plain CSS, no fonts or images to fetch. */
export const PAGE_STYLE = `
:root {
  --bg: #0f1419; --panel: #161c23; --line: #2a333d; --text: #d7dde4; --dim: #8a96a3;
  --active: #2f81f7; --active-bg: rgba(47, 129, 247, 0.16); --warn: #d29922; --bad: #f85149; --ok: #3fb950;
  font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); }
header { display: flex; gap: 16px; align-items: baseline; padding: 8px 14px; border-bottom: 1px solid var(--line); }
header h1 { font-size: 15px; margin: 0; }
header .dim, .dim { color: var(--dim); }
#status.live { color: var(--ok); }
#status.down { color: var(--bad); }
#status.replay { color: var(--warn); }
#scrubber { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 8px 14px; border-bottom: 1px solid var(--line); }
#scrubber[hidden] { display: none; }
#scrub-range { flex: 1 1 400px; }
#scrub-at { font-family: ui-monospace, monospace; min-width: 320px; }
#scrub-note { flex-basis: 100%; margin: 0; color: var(--dim); white-space: pre-wrap; }
.feed { margin-right: 10px; }
.feed.gone { color: var(--dim); text-decoration: line-through; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 420px; gap: 12px; padding: 12px; align-items: start; }
aside { display: flex; flex-direction: column; gap: 12px; position: sticky; top: 8px; max-height: calc(100vh - 60px); }
aside section, .session-group { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
h2 { font-size: 13px; margin: 0 0 6px; }
h3 { font-size: 12px; margin: 0 0 4px; color: var(--dim); font-weight: 600; text-transform: uppercase; letter-spacing: .04em; }
#empty { color: var(--dim); padding: 20px; }
#empty code { color: var(--text); }
.session-group { margin-bottom: 12px; }
.session-group > h2 .badge { margin-left: 8px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 11px; background: var(--line); }
.badge.gap { background: var(--warn); color: #000; }
.badge.outcome-unknown { background: var(--bad); color: #fff; }
.sides { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 10px; }
.sides > div { min-width: 0; }
.actor { border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; margin-bottom: 8px; background: #12181e; }
.actor > .title { display: flex; gap: 8px; align-items: baseline; margin-bottom: 4px; }
.actor > .title .name { font-weight: 600; }
.actor > .title .state { color: var(--active); font-family: ui-monospace, monospace; }
.actor.ended { opacity: .55; }
.regions { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 3fr); gap: 8px; }
.region { border: 1px dashed var(--line); border-radius: 6px; padding: 6px; min-width: 0; }
.streams { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 6px; align-items: start; }
.streams .actor { margin: 0; }
.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 1px 10px; margin-top: 6px; font-size: 12px; }
.facts dt { color: var(--dim); }
.facts dd { margin: 0; font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; font-size: 12px; }
th, td { text-align: left; padding: 1px 6px 1px 0; border-bottom: 1px solid var(--line); font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
th { color: var(--dim); font-family: inherit; font-weight: 500; }
caption { text-align: left; color: var(--dim); font-size: 11px; padding: 4px 0; }
td.num { text-align: right; }
.executions { margin: 4px 0; font-weight: 600; color: var(--ok); }
tr.changed td { color: var(--warn); }
/* Statecharts: nested boxes, the active configuration highlighted. */
.chart { font-size: 11px; overflow-x: auto; }
.st { border: 1px solid var(--line); border-radius: 8px; padding: 3px 5px; margin: 2px; min-width: 60px; }
.st-root { border: none; padding: 0; margin: 0; }
.st > .st-label { font-weight: 600; white-space: nowrap; }
.st > .st-label .initial { color: var(--dim); margin-right: 3px; }
.st > .st-label .tag, .st > .st-invoke { color: var(--dim); font-weight: 400; font-size: 10px; margin-left: 4px; }
.st-kids { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 2px; }
.st-regions > .st { border-style: dashed; }
.st-final { border-width: 3px; border-style: double; }
.st.active { border-color: var(--active); background: var(--active-bg); }
.st.active > .st-label { color: #fff; }
.st-root.active { background: none; }
.st-trans { list-style: none; margin: 2px 0 0; padding: 0; color: var(--dim); font-size: 10px; font-family: ui-monospace, monospace; }
.st-trans li { white-space: nowrap; }
.mini .st-trans { display: none; }
.mini .st { min-width: 0; }
/* Markers and timeline */
#markers ul { list-style: none; margin: 0; padding: 0; max-height: 180px; overflow-y: auto; }
.marker { padding: 2px 4px; margin: 2px 0; border-left: 3px solid; font-size: 12px; }
.marker.gap { border-color: var(--warn); }
.marker.outcome-unknown { border-color: var(--bad); }
.marker .when { color: var(--dim); margin-right: 6px; font-family: ui-monospace, monospace; }
#figures { max-height: 260px; overflow-y: auto; }
#timeline { display: flex; flex-direction: column; min-height: 200px; flex: 1; }
#timeline label { font-size: 12px; color: var(--dim); }
#timeline ol { list-style: none; margin: 4px 0 0; padding: 0; overflow-y: auto; flex: 1; font-family: ui-monospace, monospace; font-size: 11px; }
#timeline li { display: grid; grid-template-columns: 58px 110px minmax(0, 1fr); gap: 6px; border-bottom: 1px solid #1d242c; }
#timeline li .who { color: var(--dim); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#timeline li.tl-transition .what { color: var(--active); }
#timeline li.tl-marker .what { color: var(--warn); }
#timeline ol:not(.show-chatter) li.chatter { display: none; }
`;
