// Small helpers the pages share. Memory text is data: it only ever goes into textContent.
"use strict";
const ui = (() => {
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function date(iso) {
    if (!iso) return "";
    const ctx = bridge.context();
    try {
      return new Intl.DateTimeFormat(ctx.locale || undefined, {
        year: "numeric", month: "short", day: "numeric", timeZone: ctx.timeZone || undefined,
      }).format(new Date(iso));
    } catch (error) {
      return iso.slice(0, 10);
    }
  }

  function tags(list) {
    if (!list || !list.length) return null;
    return h("ul", { class: "tags", "aria-label": "Tags" }, list.map((t) => h("li", { class: "tag", text: t })));
  }

  function status(node, text, kind) {
    node.className = "status" + (kind ? " " + kind : "");
    node.textContent = text || "";
  }

  function failure(payload) {
    const error = (payload && payload.error) || {};
    return (error.code ? error.code + ": " : "") + (error.message || "Something went wrong.");
  }

  // ui/notifications/tool-cancelled: the assistant's call ended without a result. Said in
  // the page's notice, with "Try again" (the same tool and arguments, through the host)
  // when the host told us both.
  function cancelled(notice, params) {
    const reason = typeof params.reason === "string" && params.reason ? " (" + params.reason + ")" : "";
    const retry = bridge.retryable();
    status(notice, "The call was cancelled before a result came" + reason + "." +
      (retry ? "" : " Ask the assistant again to see it here."), "error");
    const old = document.getElementById("retry");
    if (old) old.remove();
    if (!retry) return bridge.reportSize();
    const button = h("button", { type: "button", class: "primary", onclick: async () => {
      button.disabled = true;
      status(notice, "Working\u2026");
      const failed = await retry();
      if (failed) {
        button.disabled = false;
        status(notice, failure(failed), "error");
      } else {
        row.remove();
        if (notice.textContent === "Working\u2026") status(notice, "");
      }
      bridge.reportSize();
    } }, "Try again");
    const row = h("div", { class: "actions", id: "retry" }, button);
    notice.after(row);
    bridge.reportSize();
  }

  // The tool result the host sent, as its payload.
  function payloadOf(result) {
    if (result && result.structuredContent) return result.structuredContent;
    const text = result && result.content && result.content[0] && result.content[0].text;
    try {
      return text ? JSON.parse(text) : null;
    } catch (error) {
      return null;
    }
  }

  // The height a page fills: the host's limit less one status line, so a message shown
  // after an action ("Working…", an error) never takes the page past the limit.
  function budget() {
    return bridge.maxHeight() - 24;
  }

  function contentHeight() {
    return Math.ceil(document.body.getBoundingClientRect().height);
  }

  // Pages of items sized to fit the inline height: items are added while the page still
  // fits, so nothing ever scrolls inside the host. "first" keeps an item on the page.
  function pager(list, nav, items, render) {
    const starts = [0];
    let page = 0;
    const label = h("p", { class: "muted", "aria-live": "polite" });
    const prev = h("button", { type: "button", onclick: () => show(page - 1) }, "Previous");
    const next = h("button", { type: "button", onclick: () => show(page + 1) }, "Next");
    nav.replaceChildren(label, h("div", { class: "pages" }, prev, next));

    function show(index) {
      page = Math.max(0, Math.min(index, starts.length - 1));
      const start = starts[page];
      list.replaceChildren();
      let end = start;
      while (end < items.length) {
        const node = render(items[end], end);
        list.append(node);
        end += 1;
        paint(start, end);
        if (contentHeight() > budget() && end - start > 1) {
          node.remove();
          end -= 1;
          break;
        }
      }
      starts[page + 1] = end;
      starts.length = page + 2;
      paint(start, end);
      bridge.reportSize();
    }

    function paint(start, end) {
      nav.hidden = items.length === 0 || (start === 0 && end >= items.length);
      label.textContent = items.length ? (start + 1) + "–" + end + " of " + items.length : "";
      prev.disabled = page === 0;
      next.disabled = end >= items.length;
    }

    function showFrom(index) {
      starts.length = 1;
      starts[0] = 0;
      page = 0;
      if (index > 0) {
        starts.push(index);
        page = 1;
      }
      show(page);
    }

    return { show: show, refresh: () => show(page), showFrom: showFrom };
  }

  return { h: h, date: date, tags: tags, status: status, failure: failure, payloadOf: payloadOf, cancelled: cancelled,
    contentHeight: contentHeight, budget: budget, pager: pager };
})();
