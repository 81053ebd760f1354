// The JSON Schemas OwnSona's pages' messages are checked against (tests/unit/test_mcp_apps_schemas.py):
// the ext-apps package's own generated schema.json (its spec types), and the MCP core
// messages the pages also exchange (JSON-RPC envelope, ping, tools/call), converted from
// the core package's zod schemas with zod's own z.toJSONSchema.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { z } from "zod/v4";
import * as core from "@modelcontextprotocol/core";
const require = createRequire(import.meta.url);
const apps = JSON.parse(readFileSync(require.resolve("@modelcontextprotocol/ext-apps/schema.json"), "utf8"));
const names = ["JSONRPCMessageSchema", "JSONRPCRequestSchema", "JSONRPCNotificationSchema",
  "JSONRPCResultResponseSchema", "JSONRPCErrorResponseSchema", "PingRequestSchema",
  "CallToolRequestSchema", "CallToolResultSchema", "EmptyResultSchema", "CancelledNotificationSchema", "ListToolsRequestSchema", "ListToolsResultSchema"];
const mcp = {};
for (const name of names) mcp[name.replace(/Schema$/, "")] = z.toJSONSchema(core[name], { target: "draft-2020-12", unrepresentable: "any", io: "input" });
const versions = Object.fromEntries(["@modelcontextprotocol/ext-apps", "@modelcontextprotocol/core", "zod"]
  .map((p) => [p, JSON.parse(readFileSync("node_modules/" + p + "/package.json", "utf8")).version]));
writeFileSync(process.argv[2], JSON.stringify({ versions, extApps: apps, mcp }, null, 1) + "\n");
