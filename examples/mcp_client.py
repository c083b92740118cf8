"""An agent's MCP client calling `kbgate mcp` (stdio) with the official MCP SDK.

    KBGATE_URL=... KBGATE_KEY=... KBGATE_AGENT=support-bot python examples/mcp_client.py

The same server as an MCP client configuration (e.g. a desktop assistant's `mcpServers`):
{"kbgate": {"command": "kbgate", "args": ["mcp"],
            "env": {"KBGATE_URL": "...", "KBGATE_KEY": "...", "KBGATE_AGENT": "support-bot"}}}
"""

from __future__ import annotations

import asyncio
import os

from mcp import Client, StdioServerParameters


async def main() -> None:
    server = StdioServerParameters(command="kbgate", args=["mcp"], env=dict(os.environ))
    async with Client(server) as client:
        turn = await client.call_tool("retrieve", {"question": "How do I rotate an API key?"})
        print(turn.structured_content)


if __name__ == "__main__":
    asyncio.run(main())
