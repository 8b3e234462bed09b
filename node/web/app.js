// bedwe dashboard: polls the node's JSON endpoints once a second and
// redraws. Read-only; no libraries, no build step.
"use strict";

const colour = { succeeded: "#2e7d32", ok: "#2e7d32", running: "#1565c0", failed: "#c62828",
  cancelled: "#9e9e9e", superseded: "#9e9e9e", powered: "#a5d6a7", dark: "#37474f", unknown: "#e0e0e0" };
const outcomeState = { ok: "succeeded", failed: "failed", cancelled: "cancelled", superseded: "superseded" };

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const short = (id) => (id || "").slice(-6);
const zero = (t) => !t || t.startsWith("0001-");
const hhmm = (t) => (zero(t) ? "" : new Date(t).toISOString().slice(11, 16));
const stamp = (t) => (zero(t) ? "" : new Date(t).toISOString().slice(0, 19).replace("T", " "));

let selected = decodeURIComponent((location.hash.match(/wf=([^&]+)/) || [])[1] || "");
let ticks = 0;

async function get(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return r.json();
}

// ---- mesh ----
function drawMesh(m) {
  $("self").textContent = "node " + short(m.self) + " · zone " + m.zone;
  $("clock").textContent = "timetable time " + stamp(m.now) + " UTC" + (m.timetable ? "" : " (no timetable)");
  const peers = m.peers || [];
  $("peer-count").textContent = peers.length;
  $("peer-count").dataset.count = peers.length;
  const zones = {};
  for (const p of peers) (zones[p.zone || "?"] ||= []).push(p);
  let html = "";
  for (const z of Object.keys(zones).sort()) {
    html += `<div class="zone" data-zone="${esc(z)}"><h3>zone ${esc(z)} <span class="muted">${zones[z].length}</span></h3>`;
    for (const p of zones[z]) {
      const power = (p.power || "").split(",")[0];
      let badges = `<span class="badge ${esc(power.replace(/ /g, "-"))}">${esc(power)}</span>`;
      if (!zero(p.next_cut)) badges += ` <span class="muted">cut ${hhmm(p.next_cut)}</span>`;
      if (p.suspected) badges += ` <span class="badge suspected">suspected</span>`;
      if (p.breaker && p.breaker !== "closed") badges += ` <span class="badge ${esc(p.breaker)}">breaker ${esc(p.breaker)}</span>`;
      if (p.draining) badges += ` <span class="badge draining">draining</span>`;
      if (p.slots && !p.room) badges += ` <span class="badge full">full</span>`;
      html += `<div class="peer" data-peer="${esc(p.id)}" data-suspected="${!!p.suspected}" data-breaker="${esc(p.breaker || "")}">
        <span class="dot ${p.connected ? "on" : ""}" title="${p.connected ? "connected" : "not connected"}"></span>
        <code title="${esc(p.id)}">${esc(short(p.id))}</code>${p.self ? ' <span class="muted">(this node)</span>' : ""}
        ${badges} <span class="muted">queue ${p.queue}${p.slots ? ` · free ${p.free || 0}/${p.slots}` : ""}</span></div>`;
    }
    html += "</div>";
  }
  $("mesh").innerHTML = html;
}

// ---- workflow list ----
function drawWorkflows(list) {
  $("workflow-count").textContent = list.length;
  $("workflow-count").dataset.count = list.length;
  $("no-workflows").hidden = list.length > 0;
  if (!selected && list.length) selected = list[0].id;
  const rows = list.map((w) => {
    const pct = w.steps_total ? Math.min(100, Math.round((100 * w.steps_done) / w.steps_total)) : 0;
    return `<tr class="wf ${w.id === selected ? "selected" : ""}" data-workflow="${esc(w.id)}" data-state="${esc(w.state)}">
      <td><code>${esc(w.id)}</code></td><td><span class="badge ${esc(w.state)}">${esc(w.state)}</span></td>
      <td><span class="bar ${esc(w.state)}" title="${w.steps_done}/${w.steps_total} steps"><span style="width:${pct}%"></span></span> ${w.steps_done}/${w.steps_total}</td>
      <td>${stamp(w.submitted)}</td><td>${stamp(w.finished)}</td></tr>`;
  });
  $("workflows").tBodies[0].innerHTML = rows.join("");
}

$("workflows").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr.wf");
  if (!tr) return;
  selected = tr.dataset.workflow;
  location.hash = "wf=" + encodeURIComponent(selected);
  tick();
});

// ---- one workflow: its steps as a graph coloured by state ----
function stepStates(wf) {
  const byPath = {};
  for (const e of wf.trace || []) (byPath[e.path] ||= []).push(e);
  const running = wf.state === "running";
  const states = {};
  // walk marks each service and says whether the structure finished.
  function walk(s, reached) {
    switch (s.kind) {
      case "service": {
        const tries = (byPath[s.path] || []).slice().sort((a, b) => a.attempt - b.attempt || new Date(a.start) - new Date(b.start));
        let st = tries.length ? outcomeState[tries[tries.length - 1].outcome] || "pending" : "pending";
        if (tries.some((t) => t.outcome === "ok")) st = "succeeded";
        if (!tries.length && reached && running) st = "running";
        // A guardian re-routed it: the next attempt runs elsewhere.
        const rerouted = st === "superseded" && running;
        if (rerouted) st = "running";
        states[s.path] = { state: st, tries, rerouted };
        return st === "succeeded";
      }
      case "seq": {
        let ok = reached;
        for (const c of s.children || []) ok = walk(c, ok) && ok;
        return ok;
      }
      case "fork": return (s.children || []).map((c) => walk(c, reached)).every(Boolean) && reached;
      case "failover": {
        let any = false, next = reached;
        for (const c of s.children || []) {
          const ok = walk(c, next);
          any ||= ok;
          next = next && !ok && hasFailure(c, states);
        }
        return any;
      }
      case "choice": {
        let any = false;
        for (const c of s.children || []) any = walk(c, reached && touched(c, byPath)) || any;
        return any;
      }
      default: return (s.children || []).map((c) => walk(c, reached)).some(Boolean);
    }
  }
  if (wf.steps) walk(wf.steps, true);
  return states;
}
function touched(s, byPath) {
  return s.kind === "service" ? !!byPath[s.path] : (s.children || []).some((c) => touched(c, byPath));
}
function hasFailure(s, states) {
  return s.kind === "service" ? ["failed", "superseded", "cancelled"].includes(states[s.path]?.state) : (s.children || []).some((c) => hasFailure(c, states));
}

function drawStep(s, states) {
  switch (s.kind) {
    case "service": {
      const st = states[s.path] || { state: "pending", tries: [] };
      const last = st.tries[st.tries.length - 1];
      const where = st.rerouted ? `re-routed as attempt ${last.attempt + 1}` : last ? `${short(last.peer)} · ${last.zone || ""}` : "";
      const more = st.rerouted ? " ↻" : st.tries.length > 1 ? ` ×${st.tries.length}` : "";
      const title = st.tries.map((t) => `attempt ${t.attempt} on ${short(t.peer)} (${t.zone || "?"}): ${t.outcome}${t.note ? " — " + t.note : ""}`).join("\n");
      return `<div class="step ${st.state}" data-path="${esc(s.path)}" data-service="${esc(s.service)}" data-state="${st.state}" title="${esc(title)}">${esc(s.service)}${more}<br><small>${esc(where)}</small></div>`;
    }
    case "seq":
      return `<div class="seq">${(s.children || []).map((c) => drawStep(c, states)).join('<span class="arrow">→</span>')}</div>`;
    default:
      return `<div class="pattern" data-kind="${esc(s.kind)}"><span class="kw">${esc(s.kind.toUpperCase())}</span><div class="branches">${(s.children || [])
        .map((c) => `<div class="branch">${c.label ? `<span class="label">${esc(c.label)}</span>` : ""}${drawStep(c, states)}</div>`).join("")}</div></div>`;
  }
}

// ---- one workflow: the timeline of its trace by peer and zone ----
function drawTimeline(wf, zoneOf) {
  const trace = wf.trace || [];
  if (!trace.length) return '<p class="muted">No step attempt reported yet.</p>';
  const rows = [];
  const key = (e) => (e.zone || zoneOf[e.peer] || "?") + " " + e.peer;
  for (const e of trace) if (!rows.includes(key(e))) rows.push(key(e));
  rows.sort();
  const t0 = Math.min(...trace.map((e) => +new Date(e.start)));
  let t1 = Math.max(...trace.map((e) => +new Date(e.end)), t0 + 1);
  if (wf.state === "running") t1 = Math.max(t1, Date.now());
  const W = 1000, L = 150, RH = 26, H = rows.length * RH + 22;
  const x = (t) => L + ((W - L - 10) * (t - t0)) / (t1 - t0);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" style="max-width:${W}px;min-width:520px" data-rows="${rows.length}">`;
  rows.forEach((r, i) => {
    const [zone, peer] = r.split(" ");
    svg += `<text x="4" y="${i * RH + 17}">${esc(zone)} · ${esc(short(peer))}</text><line x1="${L}" x2="${W}" y1="${i * RH + RH}" y2="${i * RH + RH}" stroke="#eee"/>`;
  });
  for (const e of trace) {
    const i = rows.indexOf(key(e));
    const a = x(+new Date(e.start)), b = Math.max(a + 3, x(+new Date(e.end)));
    const label = e.service + (e.attempt > 0 ? ` ↻${e.attempt}` : "");
    const tip = `${e.service} (${e.path}) attempt ${e.attempt} on ${e.peer} zone ${e.zone || "?"}\n${stamp(e.start)} – ${stamp(e.end)}: ${e.outcome}${e.note ? "\n" + e.note : ""}`;
    svg += `<g class="attempt" data-path="${esc(e.path)}" data-outcome="${esc(e.outcome)}" data-attempt="${e.attempt}"><title>${esc(tip)}</title>
      <rect x="${a}" y="${i * RH + 4}" width="${b - a}" height="${RH - 8}" rx="3" fill="${colour[e.outcome] || "#999"}" ${e.outcome === "superseded" ? 'stroke-dasharray="3 2" stroke="#555"' : ""}/>
      <text x="${a + 3}" y="${i * RH + 17}" fill="#fff">${esc(label)}</text></g>`;
  }
  const secs = (t1 - t0) / 1000;
  svg += `<text x="${L}" y="${H - 4}" fill="#777">${stamp(new Date(t0).toISOString())}</text><text x="${W - 4}" y="${H - 4}" text-anchor="end" fill="#777">+${secs.toFixed(1)} s</text></svg>`;
  const notes = trace.filter((e) => e.note).map((e) => `<li data-path="${esc(e.path)}">${esc(e.service)} attempt ${e.attempt} on ${esc(short(e.peer))}: ${esc(e.outcome)} — ${esc(e.note)}</li>`);
  return svg + legend(["ok", "failed", "superseded", "cancelled"]) + (notes.length ? `<ul class="notes">${notes.join("")}</ul>` : "");
}

function legend(states) {
  return `<div class="legend">${states.map((s) => `<span style="background:${colour[s]}"></span>${s}`).join("")}</div>`;
}

function drawWorkflow(wf, zoneOf) {
  $("workflow-panel").hidden = false;
  $("workflow-panel").dataset.workflow = wf.id;
  $("workflow-panel").dataset.state = wf.state;
  $("wf-id").textContent = wf.id;
  $("wf-state").textContent = wf.state;
  $("wf-state").className = "badge " + wf.state;
  $("wf-error").hidden = !wf.error;
  $("wf-error").textContent = wf.error || "";
  const states = stepStates(wf);
  $("graph").innerHTML = wf.steps ? drawStep(wf.steps, states) + legend(["succeeded", "running", "failed", "superseded"]) : `<pre>${esc(wf.source)}</pre>`;
  $("timeline").innerHTML = drawTimeline(wf, zoneOf);
}

// ---- timetable per zone ----
function drawTimetable(tt) {
  if (!tt.timetable) {
    $("timetable").innerHTML = '<p class="muted" id="no-timetable">No timetable in force on this node.</p>';
    return;
  }
  const t0 = +new Date(tt.from), t1 = +new Date(tt.to);
  const W = 1000, L = 110, RH = 22, H = tt.zones.length * RH + 20;
  const x = (t) => L + ((W - L - 10) * (Math.min(Math.max(t, t0), t1) - t0)) / (t1 - t0);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" style="max-width:${W}px;min-width:520px">`;
  tt.zones.forEach((z, i) => {
    svg += `<g class="tt-zone" data-zone="${esc(z.zone)}"><text x="4" y="${i * RH + 15}">${esc(z.zone)}</text>`;
    for (const w of z.windows) {
      const a = x(+new Date(w.start)), b = x(+new Date(w.end));
      svg += `<rect class="tt-window" data-state="${w.state}" x="${a}" y="${i * RH + 3}" width="${Math.max(1, b - a)}" height="${RH - 6}" fill="${colour[w.state]}"><title>${w.state}${w.stage ? " (stage " + w.stage + ")" : ""}: ${stamp(w.start)} – ${stamp(w.end)} UTC</title></rect>`;
    }
    svg += "</g>";
  });
  for (let h = 0; h <= 24; h += 6) {
    const t = t0 + h * 3600e3;
    svg += `<line x1="${x(t)}" x2="${x(t)}" y1="0" y2="${H - 16}" stroke="#fff" stroke-width="1"/><text x="${x(t)}" y="${H - 3}" text-anchor="${h === 24 ? "end" : h ? "middle" : "start"}" fill="#777">${h ? hhmm(new Date(t).toISOString()) : "now " + hhmm(tt.now)}</text>`;
  }
  $("timetable").innerHTML = svg + "</svg>" + legend(["powered", "dark", "unknown"]);
}

// ---- polling ----
let zoneOf = {};
async function tick() {
  try {
    const [mesh, list] = await Promise.all([get("api/mesh"), get("api/workflows")]);
    zoneOf = Object.fromEntries((mesh.peers || []).map((p) => [p.id, p.zone]));
    drawMesh(mesh);
    drawWorkflows(list);
    if (selected && list.some((w) => w.id === selected)) drawWorkflow(await get("api/workflows/" + encodeURIComponent(selected)), zoneOf);
    if (ticks++ % 5 === 0) drawTimetable(await get("api/timetable"));
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
    $("status").className = "muted";
  } catch (err) {
    $("status").textContent = "node not answering: " + err.message;
    $("status").className = "error";
  }
}
tick();
setInterval(tick, 1000);
