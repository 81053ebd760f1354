// recall / search_memory results as cards. Actions are tools/call through the host:
// confirm, "this helped" (reinforce), edit (update_memory), forget and its undo.
//
// Undo: the contract has no un-forget (update_memory refuses a forgotten memory with
// NOT_FOUND: "forget and re-add instead"), so undo re-adds it: remember with the card's
// text, tags and dates, then the old row's tombstone is pointed at the new one (forget
// with replaced_by_id), so a later remember of that text is not warned off by it.
"use strict";
(() => {
  const { h, date, tags, status, failure, payloadOf } = ui;
  const list = document.getElementById("cards");
  const heading = document.getElementById("heading");
  const notice = document.getElementById("notice");
  let query = null;
  let items = [];
  let pages = null;

  // The question as the assistant writes it (partial input, which may still change),
  // then as sent; the result's heading replaces it.
  function searching(params, more) {
    const args = params.arguments || {};
    if (typeof args.query !== "string") return;
    heading.textContent = "Searching for \u201c" + args.query + more + "\u201d";
    bridge.reportSize();
  }
  bridge.on("ui/notifications/tool-input-partial", (params) => searching(params, "\u2026"));
  bridge.on("ui/notifications/tool-input", (params) => {
    const args = params.arguments || {};
    if (typeof args.query === "string") query = args.query;
    searching(params, "");
  });
  bridge.on("ui/notifications/tool-cancelled", (params) => {
    heading.textContent = query ? "Memories for \u201c" + query + "\u201d" : "Memories";
    ui.cancelled(notice, params);
  });
  bridge.on("ui/notifications/tool-result", (result) => {
    const payload = payloadOf(result);
    status(notice, "");
    if (!payload || payload.ok !== true) {
      heading.textContent = "No memories";
      status(notice, failure(payload), "error");
      bridge.reportSize();
      return;
    }
    items = (payload.matches || payload.memories || []).map((m) => ({ memory: m, state: "shown" }));
    heading.textContent = items.length
      ? (query ? "Memories for \u201c" + query + "\u201d" : "Memories")
      : "No memories matched";
    pages = ui.pager(list, document.getElementById("pager"), items, card);
    pages.show(0);
  });

  function when(m) {
    const parts = [];
    if (m.occurred_at) parts.push("Happened " + date(m.occurred_at));
    else if (m.valid_from) parts.push("From " + date(m.valid_from) + (m.valid_to ? " to " + date(m.valid_to) : ""));
    parts.push("Saved " + date(m.created_at));
    if (m.last_confirmed_at && m.last_confirmed_at !== m.created_at) parts.push("Confirmed " + date(m.last_confirmed_at));
    return parts;
  }

  // Why it matched: the raw cosine, what learning added, and how a hop brought it.
  function why(m) {
    const parts = [];
    if (typeof m.score === "number") parts.push(Math.round(m.score * 100) + "% similar");
    const e = m.explain || {};
    if (e.hop === "graph" || e.hop === "session") parts.push("Linked to #" + e.hop_from);
    if (e.latest_first) parts.push("Newest of disagreeing memories");
    if (typeof e.lexical_length === "number") parts.push("Long text: its words counted " + Math.round(e.lexical_length * 100) + "%");
    if (m.salience > 0.05) parts.push("Helped before" + (m.use_count ? " (" + m.use_count + "\u00d7)" : ""));
    if (m.salience < -0.05) parts.push("Ranked lower by feedback");
    if (m.context_count) parts.push("Learned for similar questions");
    return parts;
  }

  function marks(m) {
    const out = [];
    if (m.older_than && m.older_than.length) out.push("Older: #" + m.older_than.join(", #") + " is newer");
    if (m.superseded_by && m.superseded_by.length) out.push("Outdated by #" + m.superseded_by.join(", #"));
    if (m.keep) out.push("Kept (locked)");
    if (m.expires_at) out.push("Expires " + date(m.expires_at));
    return out;
  }

  function card(item, index) {
    const m = item.memory;
    const statusLine = h("p", { class: "status", role: "status" });
    const node = h("li", { class: "card" + (item.state === "forgotten" ? " done" : ""), "data-id": m.id });
    const label = "memory " + m.id;
    if (item.state === "editing") {
      node.append(editor(item, node, statusLine, index));
      return node;
    }
    // Tags and the when/why line share a row: three cards fit the inline height.
    const meta = h("div", { class: "meta" }, tags(m.tags), [...when(m), ...why(m)].map((t) => h("span", { text: t })));
    node.append(
      h("p", { class: "text clamp3", text: m.text }),
      ...marks(m).map((t) => h("p", { class: "mark", text: t })),
      meta,
    );
    if (item.state === "forgotten") {
      node.append(h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", "aria-label": "Undo forget of " + label,
          onclick: () => undo(item, node, statusLine) }, "Undo")));
      status(statusLine, item.note || "Forgotten.", "ok");
    } else {
      const buttons = [
        h("button", { type: "button", "aria-label": "Confirm " + label, onclick: () => confirmIt(item, node, statusLine) }, "Confirm"),
        h("button", { type: "button", "aria-label": "This helped: " + label, onclick: () => helped(item, node, statusLine) }, "This helped"),
      ];
      if (!m.keep) {
        buttons.push(
          h("button", { type: "button", "aria-label": "Edit " + label, onclick: () => edit(item, index) }, "Edit"),
          h("button", { type: "button", class: "danger", "aria-label": "Forget " + label,
            onclick: () => forget(item, node, statusLine) }, "Forget"));
      }
      node.append(h("div", { class: "actions" }, buttons));
      if (item.note) status(statusLine, item.note, item.noteKind || "ok");
    }
    node.append(statusLine);
    return node;
  }

  // The id an action names is the card's own (data-id), as shown to the person.
  function idOf(node) {
    return Number(node.getAttribute("data-id"));
  }

  async function act(node, statusLine, name, args) {
    for (const b of node.querySelectorAll("button")) b.disabled = true;
    status(statusLine, "Working\u2026");
    const payload = await bridge.callTool(name, args);
    for (const b of node.querySelectorAll("button")) b.disabled = false;
    if (payload.ok !== true) status(statusLine, failure(payload), "error");
    return payload;
  }

  function settle(item, note, kind) {
    item.note = note;
    item.noteKind = kind;
    pages.refresh();
  }

  async function confirmIt(item, node, statusLine) {
    const payload = await act(node, statusLine, "confirm", { id: idOf(node) });
    if (payload.ok) {
      item.memory.last_confirmed_at = payload.last_confirmed_at;
      settle(item, "Confirmed as still true.");
    }
  }

  async function helped(item, node, statusLine) {
    const args = { memory_ids: [idOf(node)], delta: 1 };
    if (query) args.query = query;
    const payload = await act(node, statusLine, "reinforce", args);
    if (payload.ok) settle(item, "Thanks: it will rank higher for questions like this.");
  }

  async function forget(item, node, statusLine) {
    const payload = await act(node, statusLine, "forget", { id: idOf(node), reason: "Forgotten from a memory card." });
    if (payload.ok) {
      item.state = "forgotten";
      settle(item, "Forgotten.");
    }
  }

  async function undo(item, node, statusLine) {
    const m = item.memory;
    const args = { text: m.text, tags: m.tags || [], importance: m.importance };
    for (const name of ["source_provider", "capture_mode", "last_confirmed_at", "occurred_at", "valid_from", "valid_to"]) {
      if (m[name]) args[name] = m[name];
    }
    if (m.expires_at && Date.parse(m.expires_at) > Date.now()) args.expires_at = m.expires_at;
    const payload = await act(node, statusLine, "remember", args);
    if (!payload.ok) return;
    const old = idOf(node);
    // The tombstone now says where the memory went; a failure here loses nothing.
    await bridge.callTool("forget", { id: old, reason: "Restored as #" + payload.memory_id + " (undo).",
      replaced_by_id: payload.memory_id });
    item.memory = Object.assign({}, m, { id: payload.memory_id });
    item.state = "shown";
    settle(item, "Restored (now #" + payload.memory_id + ").");
  }

  function edit(item, index) {
    item.state = "editing";
    item.note = "";
    pages.showFrom(index);
  }

  function editor(item, node, statusLine, index) {
    const m = item.memory;
    const text = h("textarea", { id: "text-" + m.id, rows: 4 });
    text.value = m.text;
    const tagBox = h("input", { id: "tags-" + m.id, type: "text", autocomplete: "off" });
    tagBox.value = (m.tags || []).join(", ");
    const form = h("div", { class: "card-form", role: "group", "aria-label": "Edit memory " + m.id },
      h("label", { for: "text-" + m.id }, "Text", text),
      h("label", { for: "tags-" + m.id }, "Tags (comma separated)", tagBox),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: () => save() }, "Save"),
        h("button", { type: "button", onclick: () => { item.state = "shown"; pages.refresh(); } }, "Cancel")),
      statusLine);
    // A click, not a form submission: a host's sandbox may not allow forms (allow-forms).
    async function save() {
      const args = { id: idOf(node) };
      const newTags = tagBox.value.split(",").map((t) => t.trim()).filter((t) => t);
      if (text.value !== m.text) args.text = text.value;
      if (newTags.join(",") !== (m.tags || []).join(",")) args.tags = newTags;
      if (Object.keys(args).length === 1) {
        item.state = "shown";
        pages.refresh();
        return;
      }
      const payload = await act(node, statusLine, "update_memory", args);
      if (!payload.ok) return;
      // Shown as stored: tags come back normalised (lowercase, synonyms folded).
      const fresh = await bridge.callTool("get_memory", { id: args.id });
      if (fresh.ok && fresh.memory) {
        m.text = fresh.memory.text;
        m.tags = fresh.memory.tags;
      } else {
        if (args.text !== undefined) m.text = args.text;
        if (args.tags !== undefined) m.tags = newTags;
      }
      item.state = "shown";
      settle(item, "Saved.");
    }
    setTimeout(() => text.focus(), 0);
    return form;
  }

  bridge.start("OwnSona memory cards");
})();
