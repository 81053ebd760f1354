// OwnSona's side of MCP Apps' postMessage protocol (SEP-1865, revision 2026-01-26):
// JSON-RPC 2.0 with the host, which forwards our tools/call to the MCP server under the
// user's own connection (same token, scopes, idempotency, audit and errors as the model's
// calls). Written for these pages, no SDK: ui/initialize, ui/notifications/initialized,
// tool-input and tool-result, host-context-changed (theme and style variables),
// size-changed, ui/resource-teardown and ping.
"use strict";
const bridge = (() => {
  const PROTOCOL = "2026-01-26";
  let nextId = 1;
  const pending = new Map();
  const listeners = {};
  let context = {};
  let lastSize = "";

  function post(message) {
    window.parent.postMessage(message, "*");
  }

  function request(method, params) {
    const id = nextId++;
    post({ jsonrpc: "2.0", id: id, method: method, params: params });
    return new Promise((resolve, reject) => pending.set(id, { resolve: resolve, reject: reject }));
  }

  function notify(method, params) {
    post({ jsonrpc: "2.0", method: method, params: params || {} });
  }

  function on(method, handler) {
    listeners[method] = handler;
  }

  // Host context: the theme and the host's CSS variables (MCP Apps, "Theming"); the
  // pages' own fallbacks (base.css) fill in whatever the host leaves out.
  function applyContext(update) {
    context = Object.assign({}, context, update || {});
    const root = document.documentElement;
    if (context.theme === "light" || context.theme === "dark") {
      root.dataset.theme = context.theme;
      root.style.colorScheme = context.theme;
    }
    const variables = (context.styles && context.styles.variables) || {};
    for (const name of Object.keys(variables)) {
      if (name.startsWith("--") && typeof variables[name] === "string") {
        root.style.setProperty(name, variables[name]);
      }
    }
  }

  // The most the page may be tall inline: the hosts' 500 px, or less if the container says so.
  function maxHeight() {
    const dims = context.containerDimensions || {};
    const limit = typeof dims.height === "number" ? dims.height : dims.maxHeight;
    return typeof limit === "number" && limit > 0 ? Math.min(500, limit) : 500;
  }

  function reportSize() {
    // The content's own size (body has no margin), not the viewport the host gave us.
    const rect = document.body.getBoundingClientRect();
    const size = { width: Math.ceil(rect.width), height: Math.ceil(rect.height) };
    const key = size.width + "x" + size.height;
    if (key !== lastSize) {
      lastSize = key;
      notify("ui/notifications/size-changed", size);
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const m = event.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.method === undefined) {
      const waiting = pending.get(m.id);
      if (!waiting) return;
      pending.delete(m.id);
      if (m.error) waiting.reject(m.error);
      else waiting.resolve(m.result);
      return;
    }
    if (m.method === "ui/notifications/host-context-changed") applyContext(m.params);
    if (m.id !== undefined) {
      // Requests from the host: ping, and teardown (nothing of ours is left unsaved:
      // every action was a finished tools/call).
      post({ jsonrpc: "2.0", id: m.id, result: {} });
      return;
    }
    const handler = listeners[m.method];
    if (handler) handler(m.params || {});
  });

  async function start(appName) {
    const result = await request("ui/initialize", {
      protocolVersion: PROTOCOL,
      appInfo: { name: appName, version: "1" },
      appCapabilities: { availableDisplayModes: ["inline"] },
    });
    applyContext((result && result.hostContext) || {});
    notify("ui/notifications/initialized", {});
    new ResizeObserver(reportSize).observe(document.body);
    reportSize();
    return context;
  }

  // A tool's payload (structuredContent), or a failed one shaped like it, so a page shows
  // every failure the same way: {ok: false, error: {code, message}}.
  async function callTool(name, args) {
    try {
      const result = await request("tools/call", { name: name, arguments: args });
      if (result && result.structuredContent) return result.structuredContent;
      const text = result && result.content && result.content[0] && result.content[0].text;
      return text ? JSON.parse(text) : { ok: false, error: { code: "INTERNAL_ERROR", message: "No answer." } };
    } catch (error) {
      const message = (error && error.message) || "The host refused the call.";
      return { ok: false, error: { code: "HOST_ERROR", message: String(message) } };
    }
  }

  return { start: start, on: on, callTool: callTool, maxHeight: maxHeight, reportSize: reportSize,
    context: () => context };
})();
