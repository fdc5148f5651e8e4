// b2tjax evaluation report: renders the embedded data (gzip'd JSON, base64). Episode bodies are
// built only when their section is first opened, so a page of hundreds of episodes opens fast.
// No network access: the data is decompressed in memory.
"use strict";
let DATA = null;
let EPISODES = [];
const DAY_COLORS = ["#3b6fd8", "#e0823d", "#2f9e8f", "#c4499b", "#7c5cd6", "#d64545", "#6a8f2a", "#8a6d3b"];
const KINDS = ["intercity", "meal", "attraction", "entertainment", "hotel", "city"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "style") node.style.cssText = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const svgEl = (tag, attrs) => {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
};
const hhmm = (m) => `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(Math.round(m % 60)).padStart(2, "0")}`;
const short = (label) => label.replace(/^(breakfast|lunch|dinner): /, "");  // the colour says meal
const pct = (x) => `${(100 * x).toFixed(0)}%`;

// A clip object ({text, cut, full, lost}; b2tjax/report/clip.py): the part shown, and on a click
// the rest the page keeps (`lost`: characters not even kept).
function moreLink(c, target, tag) {
  if (!c.cut) return null;
  const link = el("span", { class: "cut more", title: "show the full text" }, ` … [${c.cut} more characters: show]`);
  link.addEventListener("click", (event) => {
    event.stopPropagation();
    target.replaceChildren(el(tag, {}, c.full || c.text),
      c.lost ? el("span", { class: "cut" }, ` … [${c.lost} more characters not kept in the page]`) : null);
  });
  return link;
}
function clipped(c) {
  if (!c || !c.text) return null;
  const box = el("pre", { class: "txt" });
  box.append(c.text);
  const more = moreLink(c, box, "span");
  if (more) box.append(more);
  return box;
}
function inline(c) {  // a clip object inside a line of text (tool arguments, memory values)
  if (typeof c === "string") return c;
  const box = el("span", {}, c.text);
  const more = moreLink(c, box, "span");
  if (more) box.append(more);
  return box;
}
function clippedPanel(ep) {
  if (!ep.clipped || !ep.clipped.length) return null;
  return el("div", { class: "panel" }, el("h3", {}, `Clipped texts (${ep.clipped.length})`),
    ep.clipped.map((c, k) => el("details", { class: "resp" },
      el("summary", {}, `clipped text ${k + 1}: ${c.where} (${c.text.length + c.cut} characters)`), clipped(c))));
}

// ---- summary -------------------------------------------------------------------------------
function renderBars() {
  const stats = new Map();  // group -> name -> [passed, n]
  for (const ep of EPISODES) {
    for (const c of ep.checks) {
      const group = (c.group || "checks").split(" · ")[0];
      if (!stats.has(group)) stats.set(group, new Map());
      const row = stats.get(group).get(c.name) || [0, 0];
      row[0] += c.passed ? 1 : 0; row[1] += 1;
      stats.get(group).set(c.name, row);
    }
  }
  const box = document.getElementById("bars");
  const labels = DATA.groups || {};
  for (const [group, rows] of stats) {
    const g = el("div", { class: "bar-group" }, el("h4", {}, labels[group] || group));
    for (const [name, [ok, n]] of rows) {
      g.append(el("div", { class: "bar", title: `show the episodes that failed ${name}`, onclick: () => setCheckFilter(name) },
        el("span", { class: "name" }, name),
        el("span", { class: "track" }, el("span", { class: "fill", style: `display:block;width:${pct(ok / n)}` })),
        el("span", { class: "rate" }, `${pct(ok / n)} (${ok}/${n})`)));
    }
    box.append(g);
  }
}

// ---- filters -------------------------------------------------------------------------------
function setCheckFilter(name) {
  document.getElementById("f-check").value = name;
  document.getElementById("f-status").value = "all";
  applyFilters();
  document.getElementById("episodes").scrollIntoView();
}

function applyFilters() {
  const status = document.getElementById("f-status").value;
  const check = document.getElementById("f-check").value;
  const agent = document.getElementById("f-agent").value;
  const id = document.getElementById("f-id").value.trim();
  let shown = 0;
  for (const node of document.querySelectorAll("details.ep")) {
    const ep = EPISODES[Number(node.dataset.idx)];
    const verdict = !ep.delivered ? "undelivered" : ep.passed ? "passed" : "failed";
    const keep = (status === "all" || status === verdict || (status === "failed" && verdict === "undelivered"))
      && (!check || ep.failed.includes(check)) && (!agent || ep.agent === agent) && (!id || ep.id.includes(id));
    node.hidden = !keep;
    shown += keep ? 1 : 0;
  }
  document.getElementById("f-count").textContent = `showing ${shown} of ${EPISODES.length} episodes`;
}

function setupFilters() {
  const counts = new Map();
  for (const ep of EPISODES) for (const name of ep.failed) counts.set(name, (counts.get(name) || 0) + 1);
  const select = document.getElementById("f-check");
  for (const [name, n] of [...counts].sort((a, b) => b[1] - a[1])) select.append(el("option", { value: name }, `${name} (${n})`));
  const agents = [...new Set(EPISODES.map((ep) => ep.agent))];
  const agentSelect = document.getElementById("f-agent");
  for (const a of agents) agentSelect.append(el("option", { value: a }, a || "(unnamed)"));
  agentSelect.parentElement.hidden = agents.length < 2;
  for (const id of ["f-status", "f-check", "f-agent", "f-id"]) document.getElementById(id).addEventListener("input", applyFilters);
}

// ---- episode list --------------------------------------------------------------------------
function renderList() {
  const list = document.getElementById("list");
  EPISODES.forEach((ep, idx) => {
    const verdict = !ep.delivered ? "undelivered" : ep.passed ? "pass" : "fail";
    const nOk = ep.checks.filter((c) => c.passed).length;
    const node = el("details", { class: "ep", "data-idx": idx, "data-verdict": verdict },
      el("summary", {},
        el("span", { class: `badge ${verdict}` }, verdict.toUpperCase()),
        ep.himap ? el("span", { class: "badge himap" }, "HiMAP") : null,
        el("span", { class: "id" }, ep.id),
        el("span", { class: "meta" }, [ep.difficulty, ep.agent, `${nOk}/${ep.checks.length} checks`,
          typeof ep.reward === "number" ? `reward ${ep.reward.toFixed(3)}` : null].filter(Boolean).join(" · ")),
        el("span", { class: "fails" }, ep.delivered ? ep.failed.join(", ") : ep.why)));
    node.addEventListener("toggle", () => {
      if (node.open && !node.dataset.rendered) { node.append(renderBody(ep)); node.dataset.rendered = "1"; }
    });
    list.append(node);
  });
}

function renderBody(ep) {
  const failing = new Map();  // item/day key -> failing check names
  for (const c of ep.checks) if (!c.passed) for (const k of c.items) failing.set(k, [...(failing.get(k) || []), c.name]);
  const body = el("div", { class: "body" });
  const plan = ep.days.length
    ? el("div", { class: "panel" }, el("h3", {}, "Itinerary"), renderTimeline(ep.days, failing))
    : el("div", { class: "panel" }, el("h3", {}, "Answer"),
      ep.answer ? el("pre", { class: "txt" }, ep.answer) : el("p", { class: "muted" }, `no plan (${ep.why || "no answer"})`));
  const request = el("div", { class: "panel request" }, el("h3", {}, "Request"), renderRequest(ep.request));
  body.append(ep.days.length
    ? el("div", { class: "row" }, request, el("div", { class: "panel" }, el("h3", {}, "Map"), renderMap(ep.days, failing)))
    : request);
  body.append(plan, el("div", { class: "panel" }, el("h3", {}, "Verdict"), renderVerdict(ep, body)));
  if (ep.himap) body.append(el("div", { class: "panel" }, el("h3", {}, "HiMAP team"), renderHimap(ep.himap)));
  const long = clippedPanel(ep);
  if (long) body.append(long);
  const turns = ep.himap ? ep.himap.coordinator : ep.turns;
  if (turns && turns.length) {
    const title = ep.himap ? "Coordinator conversation" : "Conversation";
    const info = ep.tokens !== null ? ` · ${turns.length} turns · ${ep.tokens} sampled tokens` : ` · ${turns.length} turns`;
    body.append(el("div", { class: "panel" }, el("h3", {}, title + info), renderTurns(turns),
      ep.stop_reason ? el("div", { class: "stop" }, `stop reason: ${ep.stop_reason}`) : null));
  }
  return body;
}

function renderRequest(req) {
  return el("div", {}, el("p", {}, req.text || "(no request text)"),
    el("table", { class: "facts" }, req.facts.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)))));
}

// ---- verdict grid --------------------------------------------------------------------------
function focusItems(body, keys) {
  for (const node of body.querySelectorAll(".focus")) node.classList.remove("focus");
  let first = null;
  for (const k of keys) {
    for (const node of body.querySelectorAll(`[data-key="${k}"]`)) { node.classList.add("focus"); first = first || node; }
  }
  if (first) first.scrollIntoView({ block: "center", behavior: "smooth" });
}

function renderVerdict(ep, body) {
  const box = el("div", {});
  if (!ep.delivered) box.append(el("p", { class: "err" }, `not delivered: ${ep.why}`));
  let group = null;
  let grid = null;
  for (const c of ep.checks) {
    if (c.group !== group) {
      group = c.group;
      if (group) box.append(el("div", { class: "grid-group" }, group));
      grid = el("div", { class: "grid" });
      box.append(grid);
    }
    grid.append(el("div", {
      class: `cell ${c.passed ? "ok" : "no"}`, "data-check": c.name, title: c.passed ? `${c.name}: passed` : `${c.name}: ${c.reason}`,
      onclick: c.passed ? null : () => focusItems(body, c.items),
    }, `${c.passed ? "✓" : "✗"} ${c.name}`));
  }
  const failed = ep.checks.filter((c) => !c.passed && ep.delivered);
  if (failed.length) {
    box.append(el("ul", { class: "reasons" }, failed.map((c) => el("li", {},
      el("b", { onclick: () => focusItems(body, c.items) }, c.name), ": ", c.reason || "failed",
      c.items.length ? el("span", { class: "muted" }, ` (${c.items.length} item${c.items.length > 1 ? "s" : ""} marked)`) : null))));
  }
  return box;
}

// ---- itinerary -----------------------------------------------------------------------------
function tooltip(it, failing) {
  const when = it.start !== null && it.end !== null ? `${hhmm(it.start)}–${hhmm(it.end)} ` : "";
  const leg = it.leg ? `\n${it.leg.mode}, ${it.leg.minutes} min before` : "";
  const bad = failing.get(it.key) ? `\nfails: ${failing.get(it.key).join(", ")}` : "";
  return `${when}${it.label}${it.detail ? "\n" + it.detail : ""}${leg}${bad}`;
}

function renderTimeline(days, failing) {
  const timed = days.every((d) => d.items.every((it) => it.start !== null && it.end !== null));
  const box = el("div", { class: "timeline" });
  let lo = 24 * 60, hi = 0;
  if (timed) {
    for (const d of days) for (const it of d.items) {
      lo = Math.min(lo, it.start - (it.leg ? it.leg.minutes : 0)); hi = Math.max(hi, it.end);
    }
    lo = Math.max(0, Math.floor(lo / 60) * 60); hi = Math.min(24 * 60, Math.max(lo + 60, Math.ceil(hi / 60) * 60));
    const axis = el("div", { class: "axis" });
    const step = hi - lo > 12 * 60 ? 120 : 60;
    for (let t = lo; t <= hi; t += step) axis.append(el("span", { style: `left:${(100 * (t - lo)) / (hi - lo)}%` }, hhmm(t)));
    box.append(axis);
  }
  const x = (m) => `${(100 * (m - lo)) / (hi - lo)}%`;
  for (const d of days) {
    const label = el("div", { class: `dlabel${failing.has(d.key) ? " bad" : ""}`, "data-key": d.key,
      title: failing.has(d.key) ? `fails: ${failing.get(d.key).join(", ")}` : d.title }, d.title);
    const track = el("div", { class: timed ? "track" : "slots", style: timed ? `--hours:${(hi - lo) / 60}` : "" });
    for (const it of d.items) {
      const cls = `item k-${it.kind}${failing.has(it.key) ? " bad" : ""}`;
      if (timed) {
        if (it.leg && it.leg.minutes > 0) {
          track.append(el("div", { class: "leg", style: `left:${x(it.start - it.leg.minutes)};width:calc(${x(it.start)} - ${x(it.start - it.leg.minutes)})`,
            title: `${it.leg.mode}, ${it.leg.minutes} min` }));
        }
        track.append(el("div", { class: cls, "data-key": it.key, title: tooltip(it, failing),
          style: `left:${x(it.start)};width:calc(${x(Math.max(it.end, it.start + 1))} - ${x(it.start)})` }, short(it.label)));
      } else {
        track.append(el("div", { class: cls, "data-key": it.key, title: tooltip(it, failing) }, short(it.label)));
      }
    }
    box.append(el("div", { class: "day" }, label, track));
  }
  const present = new Set(days.flatMap((d) => d.items.map((it) => it.kind)));
  box.append(el("div", { class: "legend" }, KINDS.filter((k) => present.has(k)).map((k) => el("span", {}, el("i", { class: `k-${k}` }), k)),
    timed ? el("span", {}, el("i", { style: "background:repeating-linear-gradient(45deg,#8a94a6 0 3px,transparent 3px 6px)" }), "local transport") : null,
    el("span", {}, el("i", { style: "outline:2px solid #d64545" }), "failing check")));
  return box;
}

function renderMap(days, failing) {
  const points = days.flatMap((d, di) => d.items.filter((it) => it.lat !== null && it.lon !== null).map((it) => ({ ...it, di })));
  if (!points.length) return el("p", { class: "muted" }, "no coordinates for this plan's places");
  const meanLat = points.reduce((s, p) => s + p.lat, 0) / points.length;
  const kx = Math.cos((meanLat * Math.PI) / 180);
  const xs = points.map((p) => p.lon * kx), ys = points.map((p) => -p.lat);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const W = 420, H = 300, pad = 18;
  const scale = Math.min((W - 2 * pad) / Math.max(x1 - x0, 1e-6), (H - 2 * pad) / Math.max(y1 - y0, 1e-6));
  const px = (p) => [pad + (p.lon * kx - x0) * scale, pad + (-p.lat - y0) * scale];
  const svg = svgEl("svg", { class: "map", viewBox: `0 0 ${W} ${H}`, role: "img" });
  days.forEach((d, di) => {
    const pts = points.filter((p) => p.di === di).map(px);
    if (pts.length > 1) svg.append(svgEl("polyline", { points: pts.map((p) => p.join(",")).join(" "), fill: "none",
      stroke: DAY_COLORS[di % DAY_COLORS.length], "stroke-width": 2, "stroke-opacity": 0.75 }));
  });
  points.forEach((p) => {
    const [cx, cy] = px(p);
    const color = DAY_COLORS[p.di % DAY_COLORS.length];
    const dot = svgEl("circle", { cx, cy, r: 7, fill: color, stroke: failing.has(p.key) ? "#d64545" : "#fff", "stroke-width": failing.has(p.key) ? 3 : 1.5, "data-key": p.key });
    const title = svgEl("title", {});
    title.textContent = `${days[p.di].title}: ${p.label}`;
    dot.append(title);
    svg.append(dot);
    const num = svgEl("text", { x: cx, y: cy + 3, "text-anchor": "middle", "pointer-events": "none" });
    num.textContent = String(days[p.di].day);
    svg.append(num);
  });
  const legend = el("div", { class: "legend" }, days.map((d, di) => el("span", {}, el("i", { style: `background:${DAY_COLORS[di % DAY_COLORS.length]}` }), `day ${d.day}`)));
  return el("div", {}, svg, legend);
}

// ---- conversation --------------------------------------------------------------------------
function renderShade(shade) {
  // Darker red = the sampler gave the token a lower log-probability.
  return el("div", { class: "shade txt", title: "sampled tokens shaded by -log p" }, shade.map(([piece, lp]) =>
    el("span", { style: `background:rgba(214,69,69,${Math.min(1, -lp / 6).toFixed(2)})`, title: `log p = ${lp}` }, piece)));
}

function renderTurns(turns) {
  return el("div", {}, turns.map((t, k) => el("div", { class: "turn" },
    el("div", { class: "th" }, `turn ${k + 1}` + (t.tokens !== null && t.tokens !== undefined ? ` · ${t.tokens} tokens` : "")),
    t.shade ? renderShade(t.shade) : null,
    t.think && t.think.text ? el("details", { class: "resp" }, el("summary", {}, `thought: ${t.think.text.slice(0, 140)}`), clipped(t.think)) : null,
    t.calls.map((c) => el("div", { class: "call" }, `${c.name}(`, inline(c.args), ")")),
    t.memory.map((m) => el("div", { class: "mem" }, "memory ", inline(m))),
    t.errors.map((e) => el("div", { class: "err" }, "parse error: ", inline(e))),
    t.text && !t.shade ? clipped(t.text) : null,
    t.answer ? el("details", { class: "resp" }, el("summary", {}, "answer"), clipped(t.answer)) : null,
    t.responses.map((r) => el("details", { class: `resp${r.error ? " error" : ""}` },
      el("summary", {}, `${r.error ? "✗ " : "← "}${r.kind}${r.name ? " " + r.name : ""}: ${r.text.slice(0, 160)}`), clipped(r))))));
}

// ---- HiMAP ---------------------------------------------------------------------------------
function renderHimap(h) {
  const box = el("div", {});
  const f = h.figures;
  const counts = (obj) => Object.entries(obj).map(([k, v]) => `${k} ${v}`).join(", ") || "none";
  const line = [`${f.rounds} round(s)`, f.accepted_days !== null ? `${f.accepted_days}/${f.days} days accepted` : `${f.days} days`];
  if (f.spent !== undefined && f.spent !== null) line.push(`Σ spent ${f.spent}`);
  if (f.rejections) line.push(`executor rejections: ${counts(f.rejections)}`, `Σ rejections: ${counts(f.sigma_rejections)}`);
  box.append(el("p", { class: "muted" }, line.join(" · ")));
  if (!Object.keys(h.task).length) box.append(el("p", { class: "muted" }, "Σ events, sub-goals and outcomes are not in a records file: only the streams are shown"));
  if (Object.keys(h.task).length) box.append(el("table", { class: "kv" }, el("tr", {}, Object.keys(h.task).map((k) => el("th", {}, k))),
    el("tr", {}, Object.values(h.task).map((v) => el("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v))))));
  if (h.goals.length) {
    const keys = [...new Set(h.goals.flatMap((g) => Object.keys(g)))];
    box.append(el("div", { class: "grid-group" }, "sub-goals (latest per day)"),
      el("table", { class: "kv" }, el("tr", {}, keys.map((k) => el("th", {}, k))),
        h.goals.map((g) => el("tr", {}, keys.map((k) => el("td", {}, g[k] === undefined ? "" : typeof g[k] === "object" ? JSON.stringify(g[k]) : String(g[k])))))));
  }
  box.append(el("div", { class: "grid-group" }, `day executors in parallel · Σ events on one axis (sequence 0–${h.last_seq}) · click a stream to read it`));
  const lanes = el("div", { class: "lanes" });
  const span = Math.max(1, h.last_seq + 1);
  const reader = el("div", {});
  for (const lane of h.lanes) {
    const track = el("div", { class: "ltrack" });
    for (const e of lane.events) {
      const kind = e.op === "release" ? "release" : e.code === "ok" ? (e.op === "check" ? "check" : "commit") : `${e.op === "check" ? "check " : ""}reject`;
      track.append(el("div", { class: `ev ${kind}`, style: `left:${(100 * (e.seq + 0.5)) / span}%`,
        title: `#${e.seq} ${e.op} day ${lane.day}: ${e.code}, cost ${e.cost}, Σ spent after ${e.spent}` },
        e.code !== "ok" && e.op === "commit" ? el("span", { class: "code" }, e.code) : null));
    }
    lanes.append(el("div", { class: "lane" }, el("div", { class: "dlabel" }, `day ${lane.day}`), track));
    lanes.append(el("div", { class: "lane" }, el("div", {}), el("div", { class: "streams" }, lane.streams.map((s) => {
      const o = s.outcome;
      const text = `r${s.round}: ${s.turns.length} turns → ${o ? o.status + (o.code ? ` (${o.code})` : "") : "running"}`;
      const why = o && o.reason && o.reason.text ? o.reason : null;
      return el("span", { class: `chip ${o ? o.status : ""}`, title: why ? why.text : s.name,
        onclick: () => { reader.replaceChildren(el("div", { class: "grid-group" }, s.name, why ? ": " : "", why ? inline(why) : null), renderTurns(s.turns)); } }, text);
    }))));
  }
  box.append(lanes, el("div", { class: "legend" },
    el("span", {}, el("i", { style: "background:#1f9d55" }), "commit accepted"), el("span", {}, el("i", { style: "background:#d64545" }), "commit rejected"),
    el("span", {}, el("i", { style: "background:#b7bfcc" }), "check"), el("span", {}, el("i", { style: "background:#e08a00" }), "check rejected"),
    el("span", {}, el("i", { style: "border:2px solid #6b7385" }), "release")));
  if (h.rounds.length) box.append(el("table", { class: "kv" }, el("tr", {}, el("th", {}, "round"), el("th", {}, "outcomes")),
    h.rounds.map((r) => el("tr", {}, el("td", {}, r.round), el("td", {}, r.outcomes.map((o) => `day ${o.day} ${o.status}${o.code ? ` (${o.code})` : ""}`).join(", "))))));
  box.append(reader);
  return box;
}

async function loadData() {
  const text = document.getElementById("report-data").textContent.trim();
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

loadData().then((data) => {
  DATA = data;
  EPISODES = data.episodes;
  document.getElementById("subtitle").textContent = DATA.subtitle;
  renderBars();
  setupFilters();
  renderList();
  applyFilters();
  document.body.dataset.ready = "1";
}).catch((err) => {
  document.getElementById("subtitle").textContent = `this report could not be read: ${err}`;
  document.body.dataset.ready = "error";
});
