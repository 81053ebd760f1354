// The host side of MCP Apps from the official SDK, for OwnSona's browser tests.
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
