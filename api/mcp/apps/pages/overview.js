// memory_stats as an overview: counts, top tags, and the latest memories (one read,
// list_memories, through the host). Trimmed to the inline height, never scrolled.
"use strict";
(() => {
  const { h, date, status, failure, payloadOf } = ui;
  const notice = document.getElementById("notice");

  // Partial input is ignored: these tools' arguments are not worth showing as they stream.
  bridge.on("ui/notifications/tool-cancelled", (params) => ui.cancelled(notice, params));
  bridge.on("ui/notifications/tool-result", async (result) => {
    const stats = payloadOf(result);
    if (!stats || stats.ok !== true) {
      status(notice, failure(stats), "error");
      bridge.reportSize();
      return;
    }
    const tiles = [["Memories", stats.active], ["Forgotten", stats.soft_deleted], ["Expired", stats.expired]];
    if (stats.oldest_created_at) tiles.push(["Since", date(stats.oldest_created_at)]);
    document.getElementById("stats").replaceChildren(...tiles.map(([label, value]) =>
      h("div", {}, h("dt", { text: label }), h("dd", { text: String(value === undefined ? "\u2013" : value) }))));
    const topTags = (stats.top_tags || []).slice(0, 12);
    const tagList = document.getElementById("top-tags");
    tagList.replaceChildren(...topTags.map((t) =>
      h("li", { class: "tag" }, t.tag + " ", h("span", { class: "count", text: "\u00b7 " + t.count }))));
    document.getElementById("tags-section").hidden = topTags.length === 0;
    fit(tagList);
    bridge.reportSize();

    const latest = await bridge.callTool("list_memories", { limit: 5 });
    const box = document.getElementById("latest");
    if (latest.ok !== true) {
      status(notice, failure(latest), "error");
    } else {
      box.replaceChildren(...(latest.memories || []).map((m) =>
        h("li", {}, h("p", { class: "clamp2", text: m.text }),
          h("p", { class: "meta" }, h("span", { text: "Saved " + date(m.created_at) })))));
      document.getElementById("latest-section").hidden = box.children.length === 0;
      fit(box);
    }
    bridge.reportSize();
  });

  // Drops a list's last items while the page is taller than the host allows.
  function fit(listNode) {
    while (ui.contentHeight() > ui.budget() && listNode.children.length > 1) {
      listNode.lastElementChild.remove();
    }
  }

  bridge.start("OwnSona overview");
})();
