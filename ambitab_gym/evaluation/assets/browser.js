/* ambitab-gym report: the episode browser. Plain JavaScript, no library, no network.
 * Reads the JSON of <script id="episode-data"> (layout: ambitab_gym.evaluation.browser.episode_data)
 * and builds every element with textContent, never innerHTML: stored text stays text. */
(function () {
  "use strict";
  var t0 = performance.now();
  var app = document.getElementById("eb-app");
  var source = document.getElementById("episode-data");
  if (!app || !source) return;
  var D = JSON.parse(source.textContent);
  var S = D.s, C = D.c, R = D.r, E = D.e, N = E.length;
  var ROW = 30; // px per list row (fixed: the list is virtualized)

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function str(i) { return S[i] || ""; }
  function outcome(e) { return e[4] === 1 ? "success" : e[4] === 0 ? "failure" : "not verified"; }
  function none(text) { return text === "" ? "(none)" : text; }

  // -- filter fields: a code per episode, an option per distinct value ---------------------------
  var FIELDS = [
    ["campaign", "Campaign", function (e) { return str(C[e[0]][0]); }],
    ["corpus", "Corpus", function (e) { return str(C[e[0]][2]); }],
    ["condition", "Condition", function (e) { return str(e[1]); }],
    ["seed", "Seed", function (e) { return String(e[2]); }],
    ["asker", "Asker", function (e) { return str(C[e[0]][3]); }],
    ["oracle", "Oracle", function (e) { return str(C[e[0]][4]); }],
    ["solver", "Solver", function (e) { return str(C[e[0]][5]); }],
    ["success", "Outcome", outcome],
    ["stop", "Stop reason", function (e) { return none(str(e[5])); }],
    ["verdict", "Verdict reason", function (e) { return none(str(e[6])); }],
    ["error", "Error category", function (e) { return none(str(e[7])); }]
  ];
  var codes = {}, values = {}, selects = {};
  FIELDS.forEach(function (f) {
    var seen = {}, list = [], arr = new Int32Array(N);
    for (var i = 0; i < N; i++) {
      var v = f[2](E[i]);
      var c = seen[v];
      if (c === undefined) { c = seen[v] = list.length; list.push([v, 0]); }
      list[c][1]++;
      arr[i] = c;
    }
    codes[f[0]] = arr;
    values[f[0]] = list;
  });

  // -- the layout -------------------------------------------------------------------------------
  var bar = el("div", "eb-filters");
  FIELDS.forEach(function (f) {
    var list = values[f[0]];
    var label = el("label", "eb-filter");
    label.appendChild(el("span", null, f[1]));
    var sel = el("select");
    sel.id = "eb-f-" + f[0];
    sel.setAttribute("data-field", f[0]);
    var all = el("option", null, "all");
    all.value = "-1";
    sel.appendChild(all);
    var order = list.map(function (v, i) { return i; });
    order.sort(function (a, b) {
      var x = list[a][0], y = list[b][0];
      var nx = Number(x), ny = Number(y);
      if (x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny)) return nx - ny;
      return x < y ? -1 : x > y ? 1 : 0;
    });
    order.forEach(function (i) {
      var o = el("option", null, list[i][0] + " (" + list[i][1] + ")");
      o.value = String(i);
      o.setAttribute("data-value", list[i][0]);
      sel.appendChild(o);
    });
    if (list.length < 2) sel.disabled = true;
    sel.addEventListener("change", apply);
    selects[f[0]] = sel;
    label.appendChild(sel);
    bar.appendChild(label);
  });
  var searchLabel = el("label", "eb-filter eb-search");
  searchLabel.appendChild(el("span", null, "Search"));
  var search = el("input");
  search.id = "eb-search";
  search.type = "search";
  search.placeholder = "request, dialogue, SQL, record id";
  search.addEventListener("input", apply);
  searchLabel.appendChild(search);
  bar.appendChild(searchLabel);
  var clear = el("button", "eb-clear", "Clear filters");
  clear.type = "button";
  clear.id = "eb-clear";
  clear.addEventListener("click", function () {
    FIELDS.forEach(function (f) { selects[f[0]].value = "-1"; });
    search.value = "";
    apply();
  });
  bar.appendChild(clear);

  var status = el("p", "eb-status");
  status.id = "eb-status";
  status.setAttribute("aria-live", "polite");
  var body = el("div", "eb-body");
  var list = el("div", "eb-list");
  list.id = "eb-list";
  list.setAttribute("role", "listbox");
  list.tabIndex = 0;
  var spacer = el("div", "eb-spacer");
  list.appendChild(spacer);
  var detail = el("div", "eb-detail");
  detail.id = "eb-detail";
  detail.appendChild(el("p", "eb-hint", "Pick an episode on the left to read it."));
  body.appendChild(list);
  body.appendChild(detail);
  app.appendChild(bar);
  app.appendChild(status);
  app.appendChild(body);

  // -- filtering --------------------------------------------------------------------------------
  var shown = new Int32Array(N), count = 0, selected = -1, haystack = null;
  function buildHaystack() {
    haystack = new Array(N);
    for (var i = 0; i < N; i++) {
      var e = E[i], rec = R[e[3]];
      var parts = [str(rec[0]), str(rec[1]), str(e[8]), str(e[9])];
      var turns = e[10];
      for (var k = 0; k < turns.length; k++) parts.push(str(turns[k][0]), str(turns[k][1]));
      haystack[i] = parts.join("\n").toLowerCase();
    }
  }
  function apply() {
    var start = performance.now();
    var active = [];
    FIELDS.forEach(function (f) {
      var v = Number(selects[f[0]].value);
      if (v >= 0) active.push([codes[f[0]], v]);
    });
    var q = search.value.trim().toLowerCase();
    if (q && haystack === null) buildHaystack();
    count = 0;
    outer: for (var i = 0; i < N; i++) {
      for (var a = 0; a < active.length; a++) if (active[a][0][i] !== active[a][1]) continue outer;
      if (q && haystack[i].indexOf(q) < 0) continue;
      shown[count++] = i;
    }
    spacer.style.height = count * ROW + "px";
    list.scrollTop = 0;
    status.textContent = count + " of " + N + " episodes";
    drawRows();
    api.lastFilterMs = performance.now() - start;
  }

  // -- the virtualized list ---------------------------------------------------------------------
  var pending = false;
  list.addEventListener("scroll", function () {
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; drawRows(); }); }
  });
  function rowNode(k) {
    var i = shown[k], e = E[i], rec = R[e[3]];
    var row = el("div", "eb-row " + (e[4] === 1 ? "ok" : e[4] === 0 ? "fail" : "nv"));
    row.style.top = k * ROW + "px";
    row.setAttribute("role", "option");
    row.setAttribute("data-index", String(i));
    if (i === selected) row.className += " sel";
    row.appendChild(el("span", "eb-mark", e[4] === 1 ? "\u2713" : e[4] === 0 ? "\u2717" : "\u2013"));
    row.appendChild(el("span", "eb-rid", str(rec[0])));
    row.appendChild(el("span", "eb-tag", str(C[e[0]][2]) + " \u00b7 " + str(e[1]) + " \u00b7 s" + e[2]));
    row.appendChild(el("span", "eb-tag", none(str(e[6]))));
    row.appendChild(el("span", "eb-req", str(rec[1]).slice(0, 160)));
    row.title = str(rec[0]) + " (" + outcome(e) + ")";
    return row;
  }
  function drawRows() {
    var top = list.scrollTop, height = list.clientHeight || 480;
    var first = Math.max(0, Math.floor(top / ROW) - 8);
    var last = Math.min(count, Math.ceil((top + height) / ROW) + 8);
    var frag = document.createDocumentFragment();
    for (var k = first; k < last; k++) frag.appendChild(rowNode(k));
    spacer.textContent = "";
    spacer.appendChild(frag);
  }
  list.addEventListener("click", function (ev) {
    var node = ev.target.closest ? ev.target.closest(".eb-row") : null;
    if (node) select(Number(node.getAttribute("data-index")));
  });
  list.addEventListener("keydown", function (ev) {
    if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
    var k = -1;
    for (var j = 0; j < count; j++) if (shown[j] === selected) { k = j; break; }
    k = ev.key === "ArrowDown" ? Math.min(count - 1, k + 1) : Math.max(0, k - 1);
    if (k >= 0 && k < count) {
      select(shown[k]);
      if (k * ROW < list.scrollTop || (k + 1) * ROW > list.scrollTop + list.clientHeight) {
        list.scrollTop = Math.max(0, k * ROW - list.clientHeight / 2);
      }
      ev.preventDefault();
    }
  });

  // -- one episode ------------------------------------------------------------------------------
  function field(dl, name, value) {
    dl.appendChild(el("dt", null, name));
    dl.appendChild(el("dd", null, value));
  }
  function pct(x) { return x === null || x === undefined ? "\u2013" : (100 * x).toFixed(0) + "%"; }
  function select(i) {
    selected = i;
    drawRows();
    var e = E[i], rec = R[e[3]], camp = C[e[0]];
    var ambs = {};
    rec[3].forEach(function (a) { ambs[str(a[0])] = a; });
    detail.textContent = "";
    detail.setAttribute("data-index", String(i));
    var head = el("h3", "eb-title", str(rec[0]));
    head.appendChild(el("span", "eb-badge " + (e[4] === 1 ? "ok" : e[4] === 0 ? "fail" : "nv"), outcome(e)));
    detail.appendChild(head);
    var meta = el("dl", "eb-meta");
    field(meta, "Campaign", str(camp[0]) + " (" + str(camp[1]) + ")");
    field(meta, "Corpus", str(camp[2]));
    field(meta, "Condition", str(e[1]));
    field(meta, "Seed", String(e[2]));
    field(meta, "Asker", str(camp[3]));
    field(meta, "Oracle", str(camp[4]));
    field(meta, "Solver", str(camp[5]));
    field(meta, "Stop reason", none(str(e[5])));
    field(meta, "Error", none(str(e[7])));
    field(meta, "Precision / recall", pct(e[11]) + " / " + pct(e[12]));
    detail.appendChild(meta);

    detail.appendChild(el("h4", null, "Request (public)"));
    detail.appendChild(el("p", "eb-request", str(rec[1]) || "(the corpus did not load: request not available)"));

    detail.appendChild(el("h4", null, "Dialogue"));
    var turns = e[10];
    if (!turns.length) detail.appendChild(el("p", "eb-hint", "No question was asked."));
    var ol = el("ol", "eb-dialogue");
    turns.forEach(function (t, k) {
      var li = el("li", "eb-turn");
      var q = el("div", "eb-q");
      q.appendChild(el("span", "eb-who", "Q" + (k + 1)));
      q.appendChild(el("span", "eb-text", str(t[0])));
      var a = el("div", "eb-a");
      a.appendChild(el("span", "eb-who", "A" + (k + 1)));
      a.appendChild(el("span", "eb-text", str(t[1])));
      li.appendChild(q);
      li.appendChild(a);
      ol.appendChild(li);
    });
    detail.appendChild(ol);

    detail.appendChild(el("h4", null, "Submitted SQL"));
    detail.appendChild(el("pre", "eb-sql", str(e[8]) || "(no SQL submitted)"));
    detail.appendChild(el("h4", null, "Verdict"));
    var verdict = outcome(e) + (str(e[6]) ? ": " + str(e[6]) : "") + (str(e[9]) ? " \u2014 " + str(e[9]) : "");
    detail.appendChild(el("p", "eb-verdict", verdict));

    // the privileged panel: analyst-only fields, visibly apart
    var priv = el("section", "eb-privileged");
    priv.id = "eb-privileged";
    priv.appendChild(el("h4", null, "Privileged \u2014 analyst only, never shown to an agent"));
    priv.appendChild(el("h5", null, "Credits and oracle routes per question"));
    var pl = el("ol", "eb-credits");
    turns.forEach(function (t, k) {
      var li = el("li");
      li.setAttribute("data-turn", String(k));
      var ids = t[2].map(str);
      var credit = ids.length
        ? ids.map(function (id) { var a = ambs[id]; return a ? id + " (\u201c" + str(a[1]) + "\u201d)" : id; }).join(", ")
        : "nothing";
      li.appendChild(el("div", "eb-credit", "Q" + (k + 1) + " credited: " + credit));
      if (t[3]) {
        var r = t[3];
        var route = "route: " + str(r[0]) + (str(r[1]) ? "(" + str(r[1]) + ")" : "()") + (r[3] ? "" : " [matcher reply unreadable]");
        li.appendChild(el("div", "eb-route", route));
        if (str(r[2])) li.appendChild(el("div", "eb-rationale", "rationale: " + str(r[2])));
      }
      pl.appendChild(li);
    });
    if (!turns.length) priv.appendChild(el("p", "eb-hint", "No question, no credit."));
    priv.appendChild(pl);
    priv.appendChild(el("h5", null, "Ambiguities and resolutions of this record"));
    if (rec[3].length) {
      var table = el("table", "eb-ambs");
      var hr = el("tr");
      ["id", "term", "kind", "resolution", "frozen response"].forEach(function (h) { hr.appendChild(el("th", null, h)); });
      table.appendChild(hr);
      rec[3].forEach(function (a) {
        var tr = el("tr");
        for (var j = 0; j < 5; j++) tr.appendChild(el("td", null, str(a[j])));
        table.appendChild(tr);
      });
      priv.appendChild(table);
    } else {
      priv.appendChild(el("p", "eb-hint", str(rec[1]) ? "No registered ambiguity." : "Not available (the corpus did not load)."));
    }
    priv.appendChild(el("h5", null, "Reference SQL"));
    priv.appendChild(el("pre", "eb-refsql", str(rec[2]) || "(not available)"));
    detail.appendChild(priv);
  }

  var api = {
    ready: false,
    episodes: N,
    loadMs: 0,
    lastFilterMs: 0,
    shown: function () { return count; },
    select: select,
    apply: apply
  };
  window.ambitabBrowser = api;
  apply();
  api.loadMs = performance.now() - t0; // parse the data, build the filters, draw
  api.readyAt = performance.now(); // since navigation start
  api.ready = true;
})();
