// Runs the pages' bridge.js in Node with just enough of a window for it, and plays one
// host conversation against it (test_mcp_apps_schemas.py): stdin is {bridge: the file's
// path, initialize: the ui/initialize result, host: messages the host sends once the page
// is initialized, toolResult: the answer to the page's first tools/call}. Prints the whole
// conversation in order, [[sender, message], ...], and the timeout the page armed.
// Timers are fake: the page's tools/call timeout fires when the script says so.
import { readFileSync } from "node:fs";
import vm from "node:vm";

const input = JSON.parse(readFileSync(0, "utf8"));
const conversation = [];
const listeners = [];
const timers = new Map();
let nextTimer = 1;
const parent = { postMessage: (m) => conversation.push(["app", JSON.parse(JSON.stringify(m))]) };
const elements = {};
const document = {
  documentElement: { dataset: {}, style: { setProperty() {} } },
  head: { append: (node) => { elements[node.id] = node; } },
  body: { getBoundingClientRect: () => ({ width: 400, height: 300 }) },
  getElementById: (id) => elements[id] || null,
  createElement: (tag) => ({ tag: tag, id: "", textContent: "" }),
};
const context = vm.createContext({
  window: { parent: parent, addEventListener: (type, fn) => listeners.push(fn) },
  document: document,
  ResizeObserver: class { observe() {} },
  setTimeout: (fn, ms) => { timers.set(nextTimer, { fn: fn, ms: ms }); return nextTimer++; },
  clearTimeout: (id) => timers.delete(id),
  console: console,
});
vm.runInContext(readFileSync(input.bridge, "utf8") + "\nglobalThis.bridge = bridge;", context);
const bridge = context.bridge;
const settle = () => new Promise((resolve) => setImmediate(resolve));
function deliver(message) {
  conversation.push(["host", message]);
  for (const listener of listeners) listener({ source: parent, data: message });
}
function lastRequest(method) {
  return conversation.filter(([from, m]) => from === "app" && m.method === method).pop()[1];
}

const received = [];
for (const method of ["ui/notifications/tool-input", "ui/notifications/tool-input-partial",
  "ui/notifications/tool-result", "ui/notifications/tool-cancelled"]) {
  bridge.on(method, (params) => received.push(method));
}
const started = bridge.start("schema test");
await settle();
deliver({ jsonrpc: "2.0", id: lastRequest("ui/initialize").id, result: input.initialize });
await started;
for (const message of input.host) {
  deliver(message);
  await settle();
}
// A tools/call the host answers, then one it never answers (the page's timeout fires).
const answered = bridge.callTool("recall", { query: "where does my sister live" });
await settle();
deliver({ jsonrpc: "2.0", id: lastRequest("tools/call").id, result: input.toolResult });
await answered;
const unanswered = bridge.callTool("confirm", { id: 1 });
await settle();
const armed = [...timers.values()].map((t) => t.ms);
let timedOut = null; // stays null if the call never ends
unanswered.then((payload) => { timedOut = payload; });
for (const timer of [...timers.values()]) timer.fn();
await settle();
process.stdout.write(JSON.stringify({ conversation: conversation, received: received,
  timeouts: armed, timedOut: timedOut }));
