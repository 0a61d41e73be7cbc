"""The MCP face of the knowledge protocol: the tools' one definition (`tool_catalog`, shared with the
host's stdio server) and the stateless Streamable HTTP endpoint (`stateless_server`, docs/DESIGN.md §13)."""
