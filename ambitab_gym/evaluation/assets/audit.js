/* ambitab-gym oracle-response audit page. Plain JavaScript, no library, no network.
 * Marks live in localStorage until exported as a marks JSON file for
 * `ambitab-gym audit RESULTS --import marks.json`. Every text is set with textContent. */
(function () {
  "use strict";
  var app = document.getElementById("audit-app");
  var D = JSON.parse(document.getElementById("audit-data").textContent);
  var items = D.items, MARKS = D.marks, LABELS = D.labels;
  var storeKey = "ambitab-audit:" + D.source;
  var state = {};
  Object.keys(D.stored).forEach(function (k) { state[k] = D.stored[k]; });
  try {
    var kept = JSON.parse(window.localStorage.getItem(storeKey) || "{}");
    Object.keys(kept).forEach(function (k) { state[k] = kept[k]; });
  } catch (err) { /* no local storage: marks last until the page closes */ }
  function save() {
    try { window.localStorage.setItem(storeKey, JSON.stringify(state)); } catch (err) { /* ignored */ }
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  var bar = el("div", "au-bar");
  var progress = el("span", "au-progress");
  progress.id = "au-progress";
  var who = el("label", null, "Auditor ");
  var auditor = el("input");
  auditor.id = "au-auditor";
  auditor.type = "text";
  auditor.size = 14;
  who.appendChild(auditor);
  var onlyOpen = el("label", null, " unmarked only");
  var open = el("input");
  open.type = "checkbox";
  open.id = "au-open";
  onlyOpen.insertBefore(open, onlyOpen.firstChild);
  var exportButton = el("button", null, "Export marks");
  exportButton.type = "button";
  exportButton.id = "au-export";
  bar.appendChild(progress);
  bar.appendChild(who);
  bar.appendChild(onlyOpen);
  bar.appendChild(exportButton);
  app.appendChild(bar);
  var listNode = el("div", "au-list");
  listNode.id = "au-list";
  app.appendChild(listNode);
  var more = el("button", "au-more", "Show more");
  more.type = "button";
  app.appendChild(more);

  function marked() {
    var n = 0;
    items.forEach(function (it) { if (state[it.item_id] && state[it.item_id].mark) n++; });
    return n;
  }
  function updateProgress() {
    progress.textContent = marked() + " of " + items.length + " answers marked";
  }

  function card(it) {
    var node = el("div", "au-item");
    node.setAttribute("data-item", it.item_id);
    var current = state[it.item_id] || {};
    if (current.mark) node.className += " m-" + current.mark;
    node.appendChild(el("div", "au-head", it.oracle + " \u00b7 " + it.corpus + " \u00b7 " + it.record_id +
      " \u00b7 " + it.ambiguity_id + (it.term ? " (\u201c" + it.term + "\u201d)" : "") + " \u00b7 " + it.episodes + " turn(s)"));
    node.appendChild(el("div", "au-q", "Question: " + it.question));
    var grid = el("div", "au-grid");
    var left = el("div");
    left.appendChild(el("h4", null, "Oracle answer"));
    left.appendChild(el("div", "au-box au-answer", it.answer));
    var right = el("div");
    right.appendChild(el("h4", null, "Resolution of the credited ambiguity"));
    right.appendChild(el("div", "au-box au-res", it.resolution || "(not available)"));
    if (it.response) {
      right.appendChild(el("h4", null, "Frozen response"));
      right.appendChild(el("div", "au-box au-res", it.response));
    }
    grid.appendChild(left);
    grid.appendChild(right);
    node.appendChild(grid);
    var marks = el("div", "au-marks");
    MARKS.concat([""]).forEach(function (m) {
      var label = el("label");
      var radio = el("input");
      radio.type = "radio";
      radio.name = "m-" + it.item_id;
      radio.value = m;
      radio.checked = (current.mark || "") === m;
      radio.addEventListener("change", function () {
        var entry = state[it.item_id] || {};
        entry.mark = m;
        state[it.item_id] = entry;
        node.className = "au-item" + (m ? " m-" + m : "");
        save();
        updateProgress();
      });
      label.appendChild(radio);
      label.appendChild(document.createTextNode(" " + (m ? LABELS[m] : "unmarked")));
      marks.appendChild(label);
    });
    var note = el("input");
    note.type = "text";
    note.placeholder = "note (optional)";
    note.value = current.note || "";
    note.addEventListener("change", function () {
      var entry = state[it.item_id] || {};
      entry.note = note.value;
      state[it.item_id] = entry;
      save();
    });
    marks.appendChild(note);
    node.appendChild(marks);
    return node;
  }

  var PAGE = 100, limit = PAGE;
  function draw() {
    listNode.textContent = "";
    var shown = 0, total = 0;
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      if (open.checked && state[it.item_id] && state[it.item_id].mark) continue;
      total++;
      if (shown < limit) { listNode.appendChild(card(it)); shown++; }
    }
    more.style.display = total > shown ? "" : "none";
    if (!items.length) listNode.appendChild(el("p", "note", "No credited oracle answer in these campaigns."));
    updateProgress();
  }
  more.addEventListener("click", function () { limit += PAGE; draw(); });
  open.addEventListener("change", function () { limit = PAGE; draw(); });

  function exportMarks() {
    var out = [];
    items.forEach(function (it) {
      var s = state[it.item_id];
      if (!s || !s.mark) return;
      out.push({
        item_id: it.item_id, oracle: it.oracle, corpus: it.corpus, record_id: it.record_id,
        ambiguity_id: it.ambiguity_id, answer: it.answer, resolution: it.resolution,
        mark: s.mark, note: s.note || ""
      });
    });
    return {
      format: D.format, version: 1, source: D.source, auditor: auditor.value,
      exported_at: new Date().toISOString(), marks: out
    };
  }
  exportButton.addEventListener("click", function () {
    var blob = new Blob([JSON.stringify(exportMarks(), null, 1)], { type: "application/json" });
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "ambitab-audit-marks.json";
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  });
  window.ambitabAudit = { exportMarks: exportMarks, ready: true };
  draw();
})();
