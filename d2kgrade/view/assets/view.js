/* d2kgrade view: the episodes table (sort, filter, search, pages of PAGE rows) and the episode pages' toggles.
   No dependency, no network: the rows come from data/episodes.js (window.D2K_EPISODES). */
(function () {
  "use strict";
  var PAGE = 100;
  var LABELS = {task: "task", model: "model", arm: "arm", seed: "seed", status: "status (why)",
    final_status: "final", turns: "turns", tokens: "tokens", cost_usd: "cost", correct: "correct",
    speedup_best: "vs best", speedup_eager: "vs eager", speedup_compiled: "vs compile", roofline: "roofline",
    perf_score: "perf", impl_score: "impl"};
  var NUMERIC = {seed: 1, turns: 1, tokens: 1, cost_usd: 1, speedup_best: 1, speedup_eager: 1,
    speedup_compiled: 1, roofline: 1, perf_score: 1, impl_score: 1};

  function fmt(col, v) {
    if (v === null || v === undefined || v === "") return "–";
    if (col === "correct") return v ? "yes" : "no";
    if (col.indexOf("speedup") === 0) return v.toFixed(2) + "x";
    if (col === "roofline") return (100 * v).toFixed(1) + "%";
    if (col === "cost_usd") return "$" + v.toFixed(v < 1 ? 4 : 2);
    if (col === "impl_score") return v.toFixed(1);
    if (col === "perf_score") return v.toFixed(0);
    if (col === "tokens" || col === "turns") return Math.round(v).toLocaleString("en-US");
    return String(v);
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function indexPage(table) {
    var rows = window.D2K_EPISODES || [], cols = window.D2K_COLUMNS || [];
    var state = {sort: null, dir: 1, page: 0, q: "", f: {}};
    rows.forEach(function (r) {
      r._text = [r.id, r.task, r.model, r.arm, r.status, r.final_status, r.why, r.run].join(" ").toLowerCase();
    });
    var selects = document.querySelectorAll(".controls select");
    Array.prototype.forEach.call(selects, function (s) {
      var col = s.getAttribute("data-col"), seen = {};
      rows.forEach(function (r) { seen[r[col]] = 1; });
      Object.keys(seen).sort().forEach(function (v) { var o = el("option", "", v); o.value = v; s.appendChild(o); });
      s.addEventListener("change", function () { state.f[col] = s.value; state.page = 0; update(); });
    });
    var q = document.getElementById("q");
    q.addEventListener("input", function () { state.q = q.value.toLowerCase(); state.page = 0; update(); });
    var head = el("tr");
    cols.forEach(function (c) {
      var th = el("th", "", LABELS[c] || c);
      th.setAttribute("data-col", c);
      th.addEventListener("click", function () {
        state.dir = state.sort === c ? -state.dir : 1; state.sort = c; state.page = 0; update();
      });
      head.appendChild(th);
    });
    table.tHead.appendChild(head);
    document.getElementById("prev").addEventListener("click", function () { state.page--; update(); });
    document.getElementById("next").addEventListener("click", function () { state.page++; update(); });

    function fromHash() {
      var h = decodeURIComponent(location.hash.replace(/^#/, ""));
      h.split("&").forEach(function (kv) {
        var i = kv.indexOf("="); if (i < 0) return;
        var k = kv.slice(0, i), v = kv.slice(i + 1);
        if (k === "q") { state.q = v.toLowerCase(); q.value = v; }
        var s = document.getElementById("f-" + k);
        if (s) { state.f[k] = v; s.value = v; }
      });
    }
    function toHash() {
      var parts = [];
      Object.keys(state.f).forEach(function (k) { if (state.f[k]) parts.push(k + "=" + encodeURIComponent(state.f[k])); });
      if (state.q) parts.push("q=" + encodeURIComponent(state.q));
      var h = parts.length ? "#" + parts.join("&") : "";
      if (h === location.hash || (!h && !location.hash)) return;
      try { history.replaceState(null, "", h || location.pathname); } catch (e) { /* file:// in some browsers */ }
    }
    function update() {
      var sel = rows.filter(function (r) {
        for (var k in state.f) if (state.f[k] && String(r[k]) !== state.f[k]) return false;
        return !state.q || r._text.indexOf(state.q) >= 0;
      });
      if (state.sort) {
        var c = state.sort, d = state.dir;
        sel.sort(function (a, b) {
          var x = a[c], y = b[c];
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : x > y ? 1 : 0) * d;
        });
      }
      var pages = Math.max(1, Math.ceil(sel.length / PAGE));
      state.page = Math.max(0, Math.min(state.page, pages - 1));
      var body = document.createElement("tbody");
      sel.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (r) {
        var tr = el("tr");
        tr.setAttribute("data-id", r.id);
        cols.forEach(function (c) {
          var td = el("td", NUMERIC[c] ? "num" : "");
          if (c === "task") {
            var a = el("a", "", r.task); a.href = r.page; a.title = r.id; td.appendChild(a);
          } else if (c === "status") {
            td.appendChild(el("span", "badge " + (r.status === "finished" ? "ok" : "warn"), r.status));
            if (r.why) td.appendChild(el("div", "why", r.why));
            td.className = "why";
          } else td.textContent = fmt(c, r[c]);
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      table.replaceChild(body, table.tBodies[0]);
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        th.className = th.getAttribute("data-col") === state.sort ? (state.dir > 0 ? "asc" : "desc") : "";
      });
      document.getElementById("count").textContent = sel.length + " of " + rows.length + " episodes";
      document.getElementById("pageinfo").textContent = "page " + (state.page + 1) + " of " + pages;
      document.getElementById("prev").disabled = state.page === 0;
      document.getElementById("next").disabled = state.page >= pages - 1;
      toHash();
    }
    fromHash();
    update();
    window.addEventListener("hashchange", function () { fromHash(); update(); });
  }

  function episodePage() {
    function all(open) {
      Array.prototype.forEach.call(document.querySelectorAll(".transcript details"), function (d) { d.open = open; });
    }
    Array.prototype.forEach.call(document.querySelectorAll(".expand-all"), function (b) {
      b.addEventListener("click", function () { all(true); });
    });
    Array.prototype.forEach.call(document.querySelectorAll(".collapse-all"), function (b) {
      b.addEventListener("click", function () { all(false); });
    });
    // a property's name in the grades table lights up the kernel lines its evidence cites
    Array.prototype.forEach.call(document.querySelectorAll("a.pid"), function (a) {
      a.addEventListener("click", function () {
        var pid = a.getAttribute("data-pid");
        Array.prototype.forEach.call(document.querySelectorAll(".code .ln.focus, tr.focus"), function (x) {
          x.classList.remove("focus");
        });
        Array.prototype.forEach.call(document.querySelectorAll(".code .ln.ev"), function (ln) {
          if ((" " + ln.getAttribute("data-props") + " ").indexOf(" " + pid + " ") >= 0) ln.classList.add("focus");
        });
        a.closest("tr").classList.add("focus");
        var d = document.getElementById("p-" + pid);
        if (d) d.open = true;
      });
    });
  }

  var table = document.getElementById("episodes");
  if (table) indexPage(table); else episodePage();
})();
