// OwnSona's side of MCP Apps' postMessage protocol (SEP-1865, revision 2026-01-26):
// JSON-RPC 2.0 with the host, which forwards our tools/call to the MCP server under the
// user's own connection (same token, scopes, idempotency, audit and errors as the model's
// calls). Written for these pages, no SDK, answering as the official App
// (@modelcontextprotocol/ext-apps) does; docs/mcp-apps.md lists what it serves.
"use strict";
const bridge = (() => {
  const PROTOCOL = "2026-01-26";
  // How long a page waits for the host to answer one tools/call. After it, the request
  // is cancelled (notifications/cancelled, as the SDK does on its own timeout), the page
  // says so and its buttons work again; a late answer is dropped.
  const TOOL_CALL_TIMEOUT_MS = 30000;
  // Requests the pages serve. They declare no tools (appCapabilities has no "tools"), so
  // tools/list and tools/call from the host are "method not found", like any other.
  const SERVED = {
    "ping": () => ({}),
    // Nothing of ours is left unsaved: every action was a finished tools/call.
    "ui/resource-teardown": () => ({}),
  };
  const METHOD_NOT_FOUND = -32601;
  let nextId = 1;
  const pending = new Map();
  const listeners = {};
  let context = {};
  let lastSize = "";
  let toolInput = null;
  let resultSeen = false;

  function post(message) {
    window.parent.postMessage(message, "*");
  }

  function request(method, params, timeoutMs) {
    const id = nextId++;
    post({ jsonrpc: "2.0", id: id, method: method, params: params });
    return new Promise((resolve, reject) => {
      const waiting = { resolve: resolve, reject: reject, timer: null };
      if (timeoutMs) {
        waiting.timer = setTimeout(() => {
          pending.delete(id);
          notify("notifications/cancelled", { requestId: id, reason: "timeout" });
          reject({ code: "TIMEOUT", message: "No answer from the host within " + timeoutMs / 1000 +
            " s. The action may still have happened: check before trying again." });
        }, timeoutMs);
      }
      pending.set(id, waiting);
    });
  }

  function notify(method, params) {
    post({ jsonrpc: "2.0", method: method, params: params || {} });
  }

  function on(method, handler) {
    listeners[method] = handler;
  }

  // Host context: the theme, the host's CSS variables and font faces (MCP Apps,
  // "Theming"); the pages' own fallbacks (base.css) fill in whatever the host leaves out.
  function applyContext(update) {
    context = Object.assign({}, context, update || {});
    const root = document.documentElement;
    if (context.theme === "light" || context.theme === "dark") {
      root.dataset.theme = context.theme;
      root.style.colorScheme = context.theme;
    }
    const styles = context.styles || {};
    const variables = styles.variables || {};
    for (const name of Object.keys(variables)) {
      if (name.startsWith("--") && typeof variables[name] === "string") {
        root.style.setProperty(name, variables[name]);
      }
    }
    const fonts = styles.css && styles.css.fonts;
    if (typeof fonts === "string") {
      // The host's font-face rules: CSS text, never markup. Our CSP
      // (no font-src) lets only fonts already on the device (local()) load.
      let sheet = document.getElementById("host-fonts");
      if (!sheet) {
        sheet = document.createElement("style");
        sheet.id = "host-fonts";
        document.head.append(sheet);
      }
      sheet.textContent = fonts;
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

  // JSON-RPC 2.0's message shapes (as the official transport checks them): a request, a
  // notification, a result or an error response. Anything else is dropped unread.
  function isObject(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
  }
  function isId(value) {
    return typeof value === "string" || Number.isSafeInteger(value);
  }
  function kindOf(m) {
    if (!isObject(m) || m.jsonrpc !== "2.0") return null;
    if (m.params !== undefined && !isObject(m.params)) return null;
    if (typeof m.method === "string") {
      if (m.result !== undefined || m.error !== undefined) return null;
      if (m.id === undefined) return "notification";
      return isId(m.id) ? "request" : null;
    }
    if (m.method !== undefined || !isId(m.id)) return null;
    if (isObject(m.result) && m.error === undefined) return "result";
    if (m.result === undefined && isObject(m.error) && Number.isInteger(m.error.code)
      && typeof m.error.message === "string") return "error";
    return null;
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const m = event.data;
    const kind = kindOf(m);
    if (kind === "result" || kind === "error") {
      const waiting = pending.get(m.id);
      if (!waiting) return;
      pending.delete(m.id);
      clearTimeout(waiting.timer);
      if (kind === "error") waiting.reject(m.error);
      else waiting.resolve(m.result);
    } else if (kind === "request") {
      const serve = SERVED[m.method];
      post(serve
        ? { jsonrpc: "2.0", id: m.id, result: serve(m.params || {}) }
        : { jsonrpc: "2.0", id: m.id, error: { code: METHOD_NOT_FOUND, message: "Method not found: " + m.method } });
    } else if (kind === "notification") {
      const params = m.params || {};
      if (m.method === "ui/notifications/host-context-changed") applyContext(params);
      if (m.method === "ui/notifications/tool-input" && isObject(params.arguments)) toolInput = params.arguments;
      if (m.method === "ui/notifications/tool-result") resultSeen = true;
      // Cancelled means "no result is coming"; once one is shown, there is nothing to say.
      if (m.method === "ui/notifications/tool-cancelled" && resultSeen) return;
      const handler = listeners[m.method];
      if (handler) handler(params);
    }
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

  function failed(error) {
    const code = (error && typeof error.code === "string" && error.code) || "HOST_ERROR";
    const message = (error && error.message) || "The host refused the call.";
    return { ok: false, error: { code: code, message: String(message) } };
  }

  // A tool's payload (structuredContent), or a failed one shaped like it, so a page shows
  // every failure the same way: {ok: false, error: {code, message}}.
  async function callTool(name, args) {
    try {
      const result = await request("tools/call", { name: name, arguments: args }, TOOL_CALL_TIMEOUT_MS);
      if (result && result.structuredContent) return result.structuredContent;
      const text = result && result.content && result.content[0] && result.content[0].text;
      return text ? JSON.parse(text) : { ok: false, error: { code: "INTERNAL_ERROR", message: "No answer." } };
    } catch (error) {
      return failed(error);
    }
  }

  // After tool-cancelled: the page's own tool again, with the arguments the host sent,
  // its result handed to the page's tool-result handler as if the host had sent it.
  // Null when the host never said which tool or with what (nothing to retry).
  function retryable() {
    const info = context.toolInfo;
    const name = info && info.tool && info.tool.name;
    if (typeof name !== "string" || !toolInput) return null;
    return async () => {
      try {
        const result = await request("tools/call", { name: name, arguments: toolInput }, TOOL_CALL_TIMEOUT_MS);
        resultSeen = true;
        const handler = listeners["ui/notifications/tool-result"];
        if (handler) handler(result || {});
        return null;
      } catch (error) {
        return failed(error);
      }
    };
  }

  return { start: start, on: on, callTool: callTool, retryable: retryable, maxHeight: maxHeight,
    reportSize: reportSize, context: () => context, TOOL_CALL_TIMEOUT_MS: TOOL_CALL_TIMEOUT_MS };
})();
