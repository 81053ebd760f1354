// find_conflicts / find_near_duplicates groups, side by side. Per group:
// - keep one: the others are forgotten in its favour (forget with replaced_by_id);
// - merge: one new memory (remember with supersedes: the group's rows are retired in
//   the same transaction as the insert);
// - dismiss: hidden from this view only; nothing is stored (a later scan shows it again).
"use strict";
(() => {
  const { h, date, tags, status, failure, payloadOf } = ui;
  const list = document.getElementById("groups");
  const heading = document.getElementById("heading");
  const notice = document.getElementById("notice");
  let tool = null;
  let groups = [];
  let pages = null;

  // Partial input is ignored: these tools' arguments are not worth showing as they stream.
  bridge.on("ui/notifications/tool-cancelled", (params) => ui.cancelled(notice, params));
  bridge.on("ui/notifications/tool-result", (result) => {
    const payload = payloadOf(result);
    if (!payload || payload.ok !== true) {
      heading.textContent = "Cleanup";
      status(notice, failure(payload), "error");
      bridge.reportSize();
      return;
    }
    const ctx = bridge.context();
    tool = ctx.toolInfo && ctx.toolInfo.tool && ctx.toolInfo.tool.name;
    const conflicts = tool === "find_conflicts" || (payload.groups || []).some((g) => g.reason);
    groups = (payload.groups || []).map((g) => ({ group: g, state: "open" }));
    const noun = conflicts ? "possible conflict" : "group of near duplicates";
    const nouns = conflicts ? "possible conflicts" : "groups of near duplicates";
    heading.textContent = groups.length
      ? groups.length + " " + (groups.length === 1 ? noun : nouns)
      : (conflicts ? "No possible conflicts found" : "No near duplicates found");
    pages = ui.pager(list, document.getElementById("pager"), groups, render);
    pages.show(0);
  });

  function render(item, index) {
    const g = item.group;
    const statusLine = h("p", { class: "status", role: "status" });
    const title = "Group " + (index + 1);
    const node = h("li", { class: "card", "aria-label": title, "data-ids": g.ids.join(",") });
    const about = [Math.round(g.max_similarity * 100) + "% similar"];
    if (g.reason === "relation") about.push("Same fact, different values");
    node.append(h("h2", { text: title }), h("p", { class: "meta" }, about.map((t) => h("span", { text: t }))));
    if (item.state !== "open") {
      status(statusLine, item.note, "ok");
      node.append(statusLine);
      return node;
    }
    if (item.merging) {
      node.append(merger(item, node, statusLine));
      return node;
    }
    node.append(h("ul", { class: "side" }, g.memories.map((m) =>
      h("li", { "data-id": m.id },
        h("p", { class: "clamp4", text: m.text }),
        tags(m.tags),
        h("p", { class: "meta" }, h("span", { text: "#" + m.id + " \u00b7 saved " + date(m.created_at) })),
        h("div", { class: "actions" },
          h("button", { type: "button", class: "primary", "aria-label": "Keep this: #" + m.id + ", forget the others",
            onclick: (event) => keep(item, node, statusLine, event.currentTarget) }, "Keep this"))))));
    node.append(h("div", { class: "actions" },
      h("button", { type: "button", onclick: () => { item.merging = true; pages.showFrom(index); } }, "Merge\u2026"),
      h("button", { type: "button", onclick: () => { item.state = "dismissed"; item.note = "Dismissed (nothing changed)."; pages.refresh(); } }, "Dismiss")),
      statusLine);
    return node;
  }

  function busy(node, on) {
    for (const b of node.querySelectorAll("button")) b.disabled = on;
  }

  async function keep(item, node, statusLine, button) {
    const kept = Number(button.closest("[data-id]").getAttribute("data-id"));
    const others = [...node.querySelectorAll(".side > li[data-id]")]
      .map((li) => Number(li.getAttribute("data-id"))).filter((id) => id !== kept);
    busy(node, true);
    status(statusLine, "Working\u2026");
    for (const id of others) {
      const payload = await bridge.callTool("forget", { id: id, reason: "Kept #" + kept + " instead (cleanup).",
        replaced_by_id: kept });
      if (payload.ok !== true) {
        busy(node, false);
        status(statusLine, failure(payload), "error");
        return;
      }
    }
    item.state = "kept";
    item.note = "Kept #" + kept + "; forgot #" + others.join(", #") + ".";
    pages.refresh();
  }

  function merger(item, node, statusLine) {
    const g = item.group;
    // Start from the most recently confirmed text; the person edits it into one fact.
    const newest = g.memories.slice().sort((a, b) =>
      String(b.last_confirmed_at || b.updated_at).localeCompare(String(a.last_confirmed_at || a.updated_at)))[0];
    const allTags = [...new Set(g.memories.flatMap((m) => m.tags || []))];
    const id = "merge-" + g.ids.join("-");
    const text = h("textarea", { id: id + "-text", rows: 4 });
    text.value = newest ? newest.text : "";
    const tagBox = h("input", { id: id + "-tags", type: "text", autocomplete: "off" });
    tagBox.value = allTags.join(", ");
    const form = h("div", { role: "group", "aria-label": "Merge group into one memory" },
      h("p", { class: "muted", text: "Replaces #" + g.ids.join(", #") + " with one memory." }),
      h("label", { for: id + "-text" }, "Merged text", text),
      h("label", { for: id + "-tags" }, "Tags (comma separated)", tagBox),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: () => save() }, "Save merged"),
        h("button", { type: "button", onclick: () => { item.merging = false; pages.refresh(); } }, "Cancel")),
      statusLine);
    // A click, not a form submission: a host's sandbox may not allow forms (allow-forms).
    async function save() {
      busy(node, true);
      status(statusLine, "Working\u2026");
      const payload = await bridge.callTool("remember", {
        text: text.value,
        tags: tagBox.value.split(",").map((t) => t.trim()).filter((t) => t),
        supersedes: g.ids,
        capture_mode: "explicit",
      });
      busy(node, false);
      if (payload.ok !== true) {
        status(statusLine, failure(payload), "error");
        return;
      }
      item.merging = false;
      item.state = "merged";
      item.note = "Merged into #" + payload.memory_id + ".";
      pages.refresh();
    }
    return form;
  }

  bridge.start("OwnSona cleanup");
})();
