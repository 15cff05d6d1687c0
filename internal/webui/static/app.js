// etcdpool web view: one server-sent event stream, no polling.
// Every value from etcd is written with textContent, never parsed as HTML.
"use strict";

const pools = new Map(); // name -> PoolView
const FEED_MAX = 200;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k === "width") e.style.width = v; // CSSOM, which the CSP allows; a style attribute it would not
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function duration(seconds) {
  if (!isFinite(seconds) || seconds < 0) return "?";
  seconds = Math.floor(seconds);
  if (seconds < 60) return seconds + "s";
  const m = Math.floor(seconds / 60), s = seconds % 60;
  if (m < 60) return m + "m" + String(s).padStart(2, "0") + "s";
  const h = Math.floor(m / 60);
  return h + "h" + String(m % 60).padStart(2, "0") + "m";
}

function since(ts) {
  const t = Date.parse(ts);
  return isNaN(t) ? "?" : duration((Date.now() - t) / 1000);
}

function ttl(ns) {
  return ns < 0 ? "unknown" : duration(ns / 1e9);
}

function labels(m) {
  return m ? Object.keys(m).sort().map(k => k + "=" + m[k]).join(",") : "";
}

function table(headers, rows, empty) {
  if (rows.length === 0) return el("p", { class: "empty", text: empty });
  const numeric = rows[0].cells;
  const thead = el("thead", {}, el("tr", {}, ...headers.map((h, i) =>
    el("th", { text: h, class: numeric[i] && numeric[i].classList.contains("num") ? "num" : null }))));
  return el("table", {}, thead, el("tbody", {}, ...rows));
}

function renderSummary() {
  const body = document.querySelector("#pools tbody");
  const names = [...pools.keys()].sort();
  document.getElementById("nopools").hidden = names.length > 0;
  body.replaceChildren(...names.map(name => {
    const p = pools.get(name), st = p.status || {}, cap = (st.spec && st.spec.capacity) || 0;
    const held = st.held || 0, ratio = cap > 0 ? Math.min(held / cap, 1) : 0;
    const bar = el("div", { class: "bar", "data-level": ratio >= 1 ? "full" : ratio >= 0.8 ? "warn" : "ok",
      title: held + " of " + cap + " held", role: "img", "aria-label": Math.round(ratio * 100) + "% held" },
      el("span", { width: (ratio * 100).toFixed(1) + "%" }));
    return el("tr", { "data-pool": name },
      el("td", {}, el("a", { href: "#pool-" + encodeURIComponent(name), text: name })),
      el("td", {}, bar),
      el("td", { class: "num", "data-field": "held", text: String(held) }),
      el("td", { class: "num", "data-field": "free", text: String(st.free || 0) }),
      el("td", { class: "num", "data-field": "waiting", text: String(p.queue.length) }),
      el("td", { class: "num", "data-field": "capacity", text: String(cap) }),
      el("td", { class: "num", "data-field": "instances", text: String(p.instances.length) }));
  }));
}

function renderPool(p) {
  const seats = p.seats.map(s => el("tr", { "data-seat": String(s.seat), "data-holder": s.holder },
    el("td", { class: "num", text: String(s.seat) }), el("td", { text: s.holder }), el("td", { text: s.tenant || "" }),
    el("td", { text: s.instance || "" }), el("td", { class: "num", text: String(s.token) }),
    el("td", { class: "num", "data-since": s.claimedAt, text: since(s.claimedAt) }),
    el("td", { class: "num", text: ttl(s.ttl) })));
  const queue = p.queue.map(w => el("tr", { "data-waiter": w.holder },
    el("td", { class: "num", text: String(w.position) }), el("td", { text: w.holder }), el("td", { text: w.tenant || "" }),
    el("td", { text: w.instance || labels(w.labels) }),
    el("td", { class: "num", "data-since": w.since, text: since(w.since) }),
    el("td", { text: w.reason || (w.position === 0 ? "head of the queue" : "behind " + w.position + " others") })));
  const instances = p.instances.map(i => el("tr", { "data-instance": i.id },
    el("td", { text: i.id }), el("td", { text: i.addr || "" }),
    el("td", { class: "state-" + i.state, text: i.state }), el("td", { class: "num", text: String(i.seats) }),
    el("td", { text: labels(i.labels) }), el("td", { text: i.agent || "" })));
  const det = el("details", { id: "pool-" + p.name, "data-pool": p.name, open: "" },
    el("summary", { text: p.name }));
  if (p.error) det.append(el("p", { class: "error", text: "partly unreadable: " + p.error }));
  det.append(
    el("h3", { text: "Seats" }),
    table(["seat", "holder", "tenant", "instance", "token", "age", "lease TTL"], seats, "No seat held."),
    el("h3", { text: "Queue" }),
    table(["#", "holder", "tenant", "instance or labels", "waiting", "why"], queue, "Nobody waiting."),
    el("h3", { text: "Instances" }),
    table(["id", "address", "state", "seats", "labels", "agent"], instances, "No instance: seats are anonymous."));
  return det;
}

function renderDetails() {
  const box = document.getElementById("details");
  const open = new Map([...box.querySelectorAll("details")].map(d => [d.dataset.pool, d.open]));
  box.replaceChildren(...[...pools.keys()].sort().map(name => {
    const d = renderPool(pools.get(name));
    if (open.has(name)) d.open = open.get(name);
    return d;
  }));
}

function render() {
  renderSummary();
  renderDetails();
}

function addEvent(ev) {
  const feed = document.getElementById("feed");
  const t = new Date(ev.time);
  const parts = [isNaN(t) ? "" : t.toLocaleTimeString(), ev.type, ev.pool || ""];
  if (ev.seat >= 0) parts.push("seat " + ev.seat);
  if (ev.instance) parts.push("instance " + ev.instance);
  if (ev.holder) parts.push("holder " + ev.holder);
  if (ev.tenant) parts.push("tenant " + ev.tenant);
  if (ev.reason) parts.push("(" + ev.reason + (ev.by ? ", by " + ev.by : "") + ")");
  parts.push("rev " + ev.revision);
  feed.prepend(el("li", { class: "ev-" + ev.type, "data-type": ev.type, text: parts.join("  ") }));
  while (feed.children.length > FEED_MAX) feed.lastChild.remove();
}

function setConn(state, text) {
  const c = document.getElementById("conn");
  c.dataset.state = state;
  c.textContent = text;
}

function connect() {
  const es = new EventSource("events");
  es.onopen = () => setConn("live", "live");
  es.onerror = () => setConn("reconnecting", "reconnecting…");
  es.addEventListener("snapshot", e => {
    pools.clear();
    for (const p of JSON.parse(e.data).pools) pools.set(p.name, p);
    render();
    document.body.dataset.loaded = "true";
  });
  es.addEventListener("pool", e => {
    const p = JSON.parse(e.data);
    if (p.deleted) pools.delete(p.name); else pools.set(p.name, p);
    render();
  });
  es.addEventListener("change", e => addEvent(JSON.parse(e.data)));
}

setInterval(() => {
  for (const td of document.querySelectorAll("[data-since]")) td.textContent = since(td.dataset.since);
}, 1000);
connect();
