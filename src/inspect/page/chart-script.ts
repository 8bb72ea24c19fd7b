/**
 * Browser code: draws a statechart (the `ChartNode` tree the server read from the machine config) as
 * nested boxes, parallel regions side by side, and highlights the active configuration. Each node's
 * element is kept by path, so a new snapshot only moves the highlight instead of redrawing.
 * Written without template literals: it lives inside one.
 */
export const CHART_SCRIPT = String.raw`
function h(tag, attrs, children) {
  var el = document.createElement(tag);
  if (attrs) {
    for (var k in attrs) {
      if (attrs[k] === undefined || attrs[k] === null) continue;
      if (k === 'text') el.textContent = String(attrs[k]);
      else if (k === 'class') el.className = attrs[k];
      else el.setAttribute(k, String(attrs[k]));
    }
  }
  if (children) {
    for (var i = 0; i < children.length; i++) {
      var c = children[i];
      if (c === undefined || c === null || c === false) continue;
      el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
  }
  return el;
}

function activePaths(value, prefix, out) {
  out = out || [];
  if (typeof value === 'string') { out.push(prefix ? prefix + '.' + value : value); return out; }
  if (value && typeof value === 'object') {
    for (var k in value) {
      var here = prefix ? prefix + '.' + k : k;
      out.push(here);
      activePaths(value[k], here, out);
    }
  }
  return out;
}

/** The leaf states, dotted: what the card's title (and data-state) shows. */
function stateText(value) {
  var paths = activePaths(value, '');
  return paths.filter(function (p) {
    return !paths.some(function (q) { return q.indexOf(p + '.') === 0; });
  }).join(',');
}

function transitionText(t) {
  return t.event + ' → ' + t.target + (t.guard ? ' [' + t.guard + ']' : '');
}

function buildChart(chart, mini) {
  var nodes = new Map();
  function box(node, isRoot, parentInitial) {
    var el = h('div', { class: 'st st-' + node.type + (isRoot ? ' st-root' : ''), 'data-path': node.path });
    if (!isRoot) {
      var label = h('div', { class: 'st-label' }, [
        parentInitial === node.key ? h('span', { class: 'initial', title: 'initial state', text: '●→' }) : null,
        node.key,
      ]);
      for (var t = 0; t < node.tags.length; t++) label.appendChild(h('span', { class: 'tag', text: '#' + node.tags[t] }));
      el.appendChild(label);
    }
    for (var i = 0; i < node.invokes.length; i++) el.appendChild(h('div', { class: 'st-invoke', text: 'invoke ' + node.invokes[i] }));
    if (node.description) el.setAttribute('title', node.description);
    if (node.states.length > 0) {
      var kids = h('div', { class: node.type === 'parallel' ? 'st-kids st-regions' : 'st-kids' });
      for (var j = 0; j < node.states.length; j++) kids.appendChild(box(node.states[j], false, node.initial));
      el.appendChild(kids);
    }
    if (node.transitions.length > 0) {
      var lines = node.transitions.map(transitionText);
      if (!node.description) el.setAttribute('title', (node.path || chart.key) + '\n' + lines.join('\n'));
      el.appendChild(h('ul', { class: 'st-trans' }, lines.map(function (l) { return h('li', { text: l }); })));
    }
    nodes.set(node.path, el);
    return el;
  }
  var el = h('div', { class: 'chart' + (mini ? ' mini' : '') }, [box(chart, true, undefined)]);
  return { el: el, nodes: nodes };
}

function paintChart(drawn, value) {
  var active = new Set(activePaths(value, ''));
  active.add('');
  drawn.nodes.forEach(function (el, path) { el.classList.toggle('active', active.has(path)); });
}
`;
