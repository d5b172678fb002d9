"""The style and the script of timeline.html (see `checkers.timeline` for what the page shows).

The script reads the page's JSON, lays out lanes left to right (leader, one per node, one per
client process) and draws, into `#layer`, only the items whose time falls in the scrolled view:
in each lane the items are sorted by start and never overlap, so their ends are sorted too and a
binary search finds the first visible one. Items an anomaly names are static elements of the page
(`#marked`); the script only places them. Zooming changes the pixels per millisecond and keeps
the time in the middle of the view where it was.
"""

STYLE = """
html, body { margin: 0; height: 100%; }
body { font: 12px/1.35 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a;
       display: flex; flex-direction: column; }
header { flex: none; padding: 6px 12px; border-bottom: 1px solid #c9ced4; background: #f6f7f9;
         display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 18px; }
header h1 { font-size: 15px; margin: 0; }
.facts, .note { color: #4a535c; }
.zoom button { font: inherit; min-width: 26px; margin-left: 2px; }
.legend { flex-basis: 100%; display: flex; flex-wrap: wrap; gap: 2px 14px; align-items: center; }
.key { white-space: nowrap; }
.sw { display: inline-block; width: 16px; height: 10px; border: 1px solid #7b848c;
      vertical-align: -1px; margin-right: 4px; border-radius: 2px; }
.sw.faint { opacity: .55; }
.sw.outlined { border: 2px solid #c00000; background: #fff; }
#anomalies { flex: none; max-height: 20vh; overflow: auto; padding: 2px 12px 6px;
             border-bottom: 1px solid #c9ced4; background: #fff7f7; }
#anomalies.none { background: #f3fbf5; padding: 6px 12px; }
#anomalies h2 { font-size: 13px; margin: 6px 0 2px; color: #a00000; }
#anomalies ul { margin: 0; padding-left: 18px; }
#anomalies a { font-family: ui-monospace, monospace; }
#view { flex: 1 1 auto; min-height: 0; overflow: auto; position: relative; background: #fff; }
#heads { position: sticky; top: 0; z-index: 20; height: 26px; min-width: 100%;
         background: #eef1f4; border-bottom: 1px solid #9aa3ad; }
.head { position: absolute; top: 0; height: 26px; line-height: 26px; box-sizing: border-box;
        padding: 0 4px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
        text-align: center; font-weight: 600; border-right: 1px solid #d3d8dd; }
.head.node, .head.lead { background: #e3e9f2; }
#corner { position: sticky; left: 0; z-index: 21; width: 64px; background: #eef1f4; color: #4a535c; }
#body { position: relative; min-width: 100%; }
#axis { position: sticky; left: 0; z-index: 10; width: 64px; height: 100%;
        background: #fafbfc; border-right: 1px solid #c9ced4; }
.tick { position: absolute; right: 6px; transform: translateY(-50%); font-size: 10.5px;
        color: #4a535c; font-variant-numeric: tabular-nums; }
.axband { position: absolute; left: 0; width: 6px; opacity: .8; }
.grid { position: absolute; left: 64px; right: 0; border-top: 1px solid #eef0f2; }
.lanebg { position: absolute; top: 0; bottom: 0; border-right: 1px solid #eef0f2; }
.lanebg.node, .lanebg.lead { background: #f8f9fb; }
.band { position: absolute; left: 64px; z-index: 1; box-sizing: border-box;
        border-top: 2px solid; border-bottom: 2px solid; }
.bandedge { position: absolute; left: 64px; z-index: 6; height: 2px; opacity: .9; }
.owner { position: absolute; z-index: 2; height: 12px; font-size: 9.5px; line-height: 12px;
         padding-left: 4px; color: #6b747c; border-top: 1px dashed #b5bcc3; white-space: nowrap; }
.bandlbl { position: absolute; z-index: 7; pointer-events: none; padding: 1px 6px;
            font-weight: 600; font-size: 11px; line-height: 14px; white-space: nowrap;
            background: rgba(255, 255, 255, .92); border: 1px solid; border-left-width: 5px;
            border-radius: 3px; }
.bandlbl.edge { transform: translateX(-100%); }
.bandlbl small { font-weight: 400; color: #4a535c; }
.op, .span, .mark { position: absolute; box-sizing: border-box; overflow: clip;
                    white-space: nowrap; text-overflow: ellipsis; }
.op { z-index: 3; border: 1px solid rgba(0, 0, 0, .3); border-radius: 3px; padding: 0 4px;
      font-size: 10.5px; line-height: 13px; scroll-margin: 60px 90px; }
.op.ok { background: #b7e4c7; } .op.fail { background: #f4acb7; } .op.info { background: #ffe08a; }
.op.anomaly { z-index: 4; border: 3px solid #c00000; box-shadow: 0 0 0 1px #fff; line-height: 11px; }
.op.short { color: transparent; }
.op span { scroll-margin: 60px 90px; }
.op:target, .op:has(> span:target), .band:target { outline: 3px dashed #1d232a; outline-offset: 2px; }
.op:hover { filter: brightness(.93); }
.span { z-index: 2; font-size: 10px; line-height: 12px; padding: 1px 4px;
        border-bottom: 1px solid #fff; color: #1d232a; }
.span.leader, .span.split { color: #fff; font-weight: 600; }
.span .t { position: sticky; top: 30px; }
.span.down { border: 1px dashed #7b848c; color: #4a535c; }
.mark { z-index: 5; height: 13px; border-top: 2px solid; font-size: 9.5px; line-height: 11px;
        padding: 0 3px; background: rgba(255, 255, 255, .8); }
.mark.start { border-color: #2a9d3f; color: #1d6b2b; }
.mark.stop { border-color: #1d232a; }
.mark.truncate { border-color: #c00000; color: #a00000; }
.mark.install { border-color: #1f6fb4; color: #1f6fb4; }
.mark.log-start { border-color: #7a4fb0; color: #7a4fb0; }
#tip { position: fixed; z-index: 100; display: none; pointer-events: none; max-width: 640px;
       padding: 6px 8px; border-radius: 4px; background: #1d232a; color: #fff;
       font: 11px/1.4 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
"""

SCRIPT = r"""
(() => {
  "use strict";
  const D = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const view = $("view"), body = $("body"), axis = $("axis"), layer = $("layer");
  const heads = $("heads"), tip = $("tip");
  const AXIS = 64, HEAD = 27, PAD = 12, MIN_BOX = 3, ROOM = 16, LABEL = 11;
  const WIDTH = {lead: 104, node: 88, proc: 132};
  const MAX_HEIGHT = 8e6;  // px; browsers stop laying out far beyond this
  const ESC = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"};
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);
  const show = (v) => { const s = typeof v === "string" ? v : JSON.stringify(v); return s.length > 400 ? s.slice(0, 399) + "…" : s; };
  const sec = (ms) => (ms / 1e3).toFixed(3) + " s";
  const dur = (ms) => ms < 1e3 ? ms.toFixed(1) + " ms" : (ms / 1e3).toFixed(2) + " s";
  let scale = D.scale;  // px per ms
  const y = (t) => PAD + t * scale;

  // --- lanes ---------------------------------------------------------------------------------
  const lanes = [];
  let width = AXIS;
  function addLane(spec) {
    const lane = {x: width, base: 0, advance: true, ...spec, id: lanes.length};
    lane.ends = Float64Array.from(lane.rows, lane.endOf);
    lanes.push(lane);
    if (lane.advance) width += lane.w;
    return lane;
  }
  if (D.nodes.length) {
    addLane({head: "leader", title: "who claimed leadership (red: two nodes at once)", cls: "lead",
             w: WIDTH.lead, rows: D.tenures, startOf: (r) => r[0], endOf: (r) => r[1], draw: drawTenure});
    D.nodes.forEach((name, n) => {
      const lane = addLane({head: "node " + name, title: "node " + name + ": role and epoch", cls: "node",
                            w: WIDTH.node, rows: D.spans.filter((s) => s[0] === n),
                            startOf: (r) => r[1], endOf: (r) => r[2], draw: drawSpan, advance: false});
      addLane({x: lane.x, w: lane.w, rows: D.marks.filter((m) => m[0] === n), startOf: (r) => r[1],
               endOf: (r) => r[1], draw: drawMark, node: name});
    });
  }
  const procLane = [], procStart = width;
  for (let lo = 0, c = 0; c < D.columns.length; c++) {
    let hi = lo;
    while (hi < D.ops.length && D.ops[hi][0] === c) hi++;
    const lane = addLane({head: "process", title: "client processes, one after another", cls: "proc",
                          w: WIDTH.proc, rows: D.ops.slice(lo, hi), base: lo,
                          startOf: (r) => r[1], endOf: (r) => r[2], draw: drawOp});
    lane.owners = addLane({x: lane.x, w: lane.w, rows: D.columns[c], startOf: (r) => r[0],
                           endOf: (r) => r[1], draw: drawOwner, advance: false});
    procLane.push(lane);
    lo = hi;
  }

  // --- items -----------------------------------------------------------------------------------
  function opBox(lane, i) {
    const op = lane.rows[i], next = lane.rows[i + 1], top = y(op[1]);
    const room = next ? y(next[1]) - top - 1 : ROOM;
    return {top, h: Math.max(MIN_BOX, (op[2] - op[1]) * scale, Math.min(ROOM, room))};
  }
  function drawOp(lane, i, out) {
    const k = lane.base + i, op = lane.rows[i];
    if (D.why[k] !== undefined) return;  // a static, outlined element of #marked
    const b = opBox(lane, i);
    // Zoomed far out, ops of a lane fall on the same pixels: draw an ok op only where there is
    // room, so that a screen never holds more than a few hundred boxes per lane.
    if (b.top < lane.drawnTo && op[3] === 0) return;
    lane.drawnTo = b.top + MIN_BOX;
    out.push(`<div class="op ${D.types[op[3]]}" data-k="${k}" style="left:${lane.x + 3}px;` +
             `top:${b.top.toFixed(1)}px;width:${lane.w - 6}px;height:${b.h.toFixed(1)}px">` +
             `${b.h >= LABEL ? esc(op[4]) : ""}</div>`);
  }
  function bar(lane, i, start, end, cls, color, text, out) {
    const top = y(start), h = Math.max(1, (end - start) * scale);
    out.push(`<div class="span ${cls}" data-t="${lane.id}:${i}" style="left:${lane.x + 2}px;` +
             `top:${top.toFixed(1)}px;width:${lane.w - 4}px;height:${h.toFixed(1)}px;` +
             `background:${color}"><span class="t">${h >= LABEL ? esc(text) : ""}</span></div>`);
  }
  function drawSpan(lane, i, out) {
    const s = lane.rows[i];
    bar(lane, i, s[1], s[2], s[3], D.colors[s[3]] || "#ddd", s[3] + (s[4] == null ? "" : " e" + s[4]), out);
  }
  function drawTenure(lane, i, out) {
    const t = lane.rows[i];
    bar(lane, i, t[0], t[1], t[3] ? "split" : "leader", t[3] ? D.colors.split : D.colors.leader, t[2], out);
  }
  function drawOwner(lane, i, out) {
    const r = lane.rows[i];
    if (y(r[0]) < lane.drawnTo) return;
    lane.drawnTo = y(r[0]) + 14;
    // the name goes above the process's first op when the previous process left room for it
    const room = i === 0 ? Infinity : y(r[0]) - y(lane.rows[i - 1][1]);
    out.push(`<div class="owner" style="left:${lane.x}px;top:${(y(r[0]) - 13).toFixed(1)}px;` +
             `width:${lane.w}px">${room >= 14 ? "process " + esc(D.processes[r[2]]) : ""}</div>`);
  }
  function headText(lane, t0, t1) {
    const owners = lane.owners, names = [];
    for (let i = firstVisible(owners, t0); i < owners.rows.length && owners.rows[i][0] <= t1; i++) {
      names.push(D.processes[owners.rows[i][2]]);
    }
    if (!names.length) return "—";
    if (names.length <= 3) return (names.length > 1 ? "processes " : "process ") + names.join(", ");
    return `processes ${names[0]} … ${names[names.length - 1]} (${names.length})`;
  }
  const SYMBOL = {start: "▲", stop: "■", truncate: "✕", install: "◆", "log-start": "⇥"};
  function drawMark(lane, i, out) {
    const m = lane.rows[i];
    out.push(`<div class="mark ${m[2]}" data-t="${lane.id}:${i}" style="left:${lane.x + 2}px;` +
             `top:${(y(m[1]) - 1).toFixed(1)}px;width:${lane.w - 4}px">${SYMBOL[m[2]] || ""} ${esc(m[2])}</div>`);
  }

  // --- layout and drawing ----------------------------------------------------------------------
  function firstVisible(lane, t0) {
    let a = 0, b = lane.ends.length;
    while (a < b) { const m = (a + b) >> 1; if (lane.ends[m] < t0) a = m + 1; else b = m; }
    return a;
  }
  function tickStep() {
    for (let step = 1; ; step *= 10) {
      for (const k of [1, 2, 5]) if (step * k * scale >= 56) return step * k;
    }
  }
  function render() {
    const t0 = (view.scrollTop - HEAD - PAD - 200) / scale;
    const t1 = (view.scrollTop + view.clientHeight + 200) / scale;
    const x0 = view.scrollLeft - 300, x1 = view.scrollLeft + view.clientWidth + 300;
    const out = [], ticks = [];
    const step = tickStep(), digits = step >= 1e3 ? 0 : step >= 100 ? 1 : step >= 10 ? 2 : 3;
    for (let t = Math.max(0, Math.floor(t0 / step) * step); t <= Math.min(t1, D.end); t += step) {
      ticks.push(`<div class="tick" style="top:${y(t).toFixed(1)}px">${(t / 1e3).toFixed(digits)} s</div>`);
      out.push(`<div class="grid" style="top:${y(t).toFixed(1)}px;width:${width - AXIS}px"></div>`);
    }
    D.bands.forEach((b) => ticks.push(`<div class="axband" style="top:${y(b[1]).toFixed(1)}px;` +
      `height:${Math.max(2, (b[2] - b[1]) * scale).toFixed(1)}px;background:${b[4]}"></div>`));
    for (const lane of lanes) {
      if (lane.x + lane.w < x0 || lane.x > x1) continue;
      lane.drawnTo = -Infinity;
      for (let i = firstVisible(lane, t0); i < lane.rows.length && lane.startOf(lane.rows[i]) <= t1; i++) {
        lane.draw(lane, i, out);
      }
    }
    D.bands.forEach((b) => {
      for (const t of [b[1], b[2]]) {
        if (t >= t0 && t <= t1) {
          out.push(`<div class="bandedge" style="top:${(y(t) - 1).toFixed(1)}px;width:${width - AXIS}px;` +
                   `background:${b[4]}"></div>`);
        }
      }
    });
    const v0 = (view.scrollTop - PAD) / scale, v1 = (view.scrollTop + view.clientHeight - HEAD - PAD) / scale;
    // A band's label stays in view while its band is: right of the lanes when the view has room
    // there, else at the view's right edge, where it hides the fewest ops.
    const outside = view.clientWidth - width > 300;
    const at = outside ? width + 8 : Math.min(width, view.scrollLeft + view.clientWidth) - 8;
    D.bands.forEach((b, i) => {
      if (b[2] < v0 || b[1] > v1 || (b[2] - b[1]) * scale < 20) return;
      const top = Math.max(Math.min(Math.max(view.scrollTop + 4, y(b[1]) + 4), y(b[2]) - 20), y(b[1]));
      out.push(`<div class="bandlbl${outside ? "" : " edge"}" data-b="${i}" style="top:${top.toFixed(1)}px;left:${at}px;` +
               `border-color:${b[4]}">${esc(b[0] + " " + b[3])} <small>${sec(b[1])} → ${sec(b[2])}</small></div>`);
    });
    for (const lane of procLane) {
      const text = headText(lane, v0, v1);
      if (lane.headEl.textContent !== text) lane.headEl.textContent = text;
    }
    axis.innerHTML = ticks.join("");
    layer.innerHTML = out.join("");
  }
  function layout() {
    const height = PAD * 2 + D.end * scale, full = Math.max(width, view.clientWidth);
    body.style.height = height + "px";
    body.style.width = heads.style.width = width + "px";
    for (const el of document.querySelectorAll("#bands .band")) {
      const b = D.bands[+el.dataset.b];
      el.style.top = y(b[1]).toFixed(1) + "px";
      el.style.height = Math.max(3, (b[2] - b[1]) * scale).toFixed(1) + "px";
      el.style.width = (full - AXIS) + "px";
      el.style.background = b[4] + "44";
      el.style.borderColor = b[4];
    }
    for (const el of document.querySelectorAll("#marked .op")) {
      const k = +el.dataset.k, lane = procLane[D.ops[k][0]], b = opBox(lane, k - lane.base);
      el.style.cssText = `left:${lane.x + 3}px;top:${b.top.toFixed(1)}px;width:${lane.w - 6}px;` +
                         `height:${Math.max(b.h, 10).toFixed(1)}px`;
      el.classList.toggle("short", b.h < LABEL);
    }
  }
  function setup() {
    const cells = lanes.filter((l) => l.head).map((l) =>
      `<div class="head ${l.cls}" title="${esc(l.title)}" style="left:${l.x}px;width:${l.w}px">${esc(l.head)}</div>`);
    const bg = lanes.filter((l) => l.head).map((l) =>
      `<div class="lanebg ${l.cls}" style="left:${l.x}px;width:${l.w}px"></div>`);
    heads.insertAdjacentHTML("beforeend", cells.join(""));
    const cellsEls = heads.querySelectorAll(".head:not(#corner)");
    lanes.filter((l) => l.head).forEach((l, i) => { l.headEl = cellsEls[i]; });
    $("bands").insertAdjacentHTML("beforebegin", bg.join(""));
    for (const el of document.querySelectorAll("#marked .op")) {
      const op = D.ops[+el.dataset.k];
      el.classList.add(D.types[op[3]]);
      el.append(op[4]);
    }
  }

  // --- zoom, hover, links ----------------------------------------------------------------------
  const fit = () => (view.clientHeight - HEAD - 2 * PAD) / Math.max(D.end, 1);
  const clampScale = (s) => Math.min(Math.max(s, 1e-4), 50, MAX_HEIGHT / Math.max(D.end, 1));
  function zoomTo(next) {
    const middle = (view.scrollTop + view.clientHeight / 2 - HEAD - PAD) / scale;
    scale = clampScale(next);
    layout();
    view.scrollTop = middle * scale + HEAD + PAD - view.clientHeight / 2;
    render();
  }
  $("zoom-in").onclick = () => zoomTo(scale * 2);
  $("zoom-out").onclick = () => zoomTo(scale / 2);
  $("zoom-fit").onclick = () => zoomTo(fit());

  function describeOp(k) {
    const op = D.ops[k], lines = [
      `#${op[5]} → #${op[6]}  ${D.types[op[3]]} ${D.fs[op[11]]}`,
      `process ${D.processes[op[12]]}` + (op[7] == null ? "" : `  node ${op[7]}`),
      `${sec(op[1])} → ${sec(op[2])}  (${dur(op[2] - op[1])})`,
      `invoke: ${show(op[8])}`, `result: ${show(op[9])}`];
    if (op[10] != null) lines.push(`error:  ${show(op[10])}`);
    if (D.why[k] !== undefined) lines.push(`named by: ${D.why[k]}`);
    return lines.join("\n");
  }
  function describeItem(lane, r) {
    if (lane.draw === drawSpan) {
      return `node ${D.nodes[r[0]]}: ${r[3]}` + (r[4] == null ? "" : ` in epoch ${r[4]}`) +
             (r[5] == null ? "" : `, leader ${r[5]}`) + `\n${sec(r[1])} → ${sec(r[2])}  (${dur(r[2] - r[1])})`;
    }
    if (lane.draw === drawMark) return `node ${lane.node}: ${r[3]}\nat ${sec(r[1])}`;
    return `${r[3] ? "two nodes claim leadership: " : "leader: "}${r[2]}\n${sec(r[0])} → ${sec(r[1])}`;
  }
  function describeBand(b) {
    const name = b[0] === "node-exit" ? "node exited on its own:" : `fault: ${b[0]}`;
    return `${name} ${b[3]}\n${sec(b[1])} → ${sec(b[2])}  (${dur(b[2] - b[1])}), nemesis op #${b[5]}` +
           (D.alignment ? `\nnode lanes aligned: ${D.alignment}` : "");
  }
  function describe(el) {
    if (el.dataset.k !== undefined) return describeOp(+el.dataset.k);
    if (el.dataset.b !== undefined) return describeBand(D.bands[+el.dataset.b]);
    const [l, i] = el.dataset.t.split(":").map(Number);
    return describeItem(lanes[l], lanes[l].rows[i]);
  }
  view.addEventListener("mousemove", (e) => {
    const el = e.target.closest("[data-k],[data-t],[data-b]");
    if (!el) { tip.style.display = "none"; return; }
    tip.textContent = describe(el);
    tip.style.display = "block";
    const w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.min(e.clientX + 14, innerWidth - w - 4) + "px";
    tip.style.top = (e.clientY + 16 + h > innerHeight ? e.clientY - h - 10 : e.clientY + 16) + "px";
  });
  view.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  let pending = false;
  view.addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  });
  addEventListener("resize", () => { layout(); render(); });

  scale = clampScale(Math.max(scale, fit()));  // a short run fills the screen
  setup();
  layout();
  render();
  const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (target) target.scrollIntoView({block: "center", inline: "center"});
  document.documentElement.dataset.drawn = performance.now().toFixed(0);  // for tests and benchmarks
})();
"""
