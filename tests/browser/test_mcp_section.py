"""The console's MCP section (docs/mcp.md): a tool server added by a person, its
state and last error in words, turned off and removed; companiond's own MCP
endpoint turned on with its token shown, then off."""

import json

from playwright.sync_api import expect

from conftest import shot


def test_mcp_section(page, server):
    page.goto(server.url + "/console/#mcp")
    expect(page.locator("#section-mcp")).to_be_visible()
    expect(page.locator("#mcp-body")).to_contain_text("No MCP servers yet.")
    # a server whose program does not exist: saved, then shown failing with its error
    page.click("#mcp-add-box summary")
    page.fill("#mcp-name", "broken")
    page.fill("#mcp-config", '{"command": "/nonexistent/mcp-server", "args": ["--x"]}')
    page.click("#mcp-add")
    expect(page.locator("#mcp-result")).to_contain_text("broken was saved")
    row = page.locator('#mcp-body tr[data-name="broken"]')
    expect(row).to_contain_text("cannot start /nonexistent/mcp-server", timeout=10000)
    expect(row).to_contain_text("restarting")
    saved = json.loads((server.data / "config" / "mcp_servers.json").read_text())
    assert saved["mcpServers"]["broken"]["args"] == ["--x"]
    # settings that are not JSON are refused in the page
    page.fill("#mcp-name", "other")
    page.fill("#mcp-config", "{not json")
    page.click("#mcp-add")
    expect(page.locator("#mcp-result")).to_contain_text("not JSON")
    # turn it off, then remove it (a second press confirms)
    row.get_by_role("button", name="Turn off").click()
    expect(page.locator("#mcp-result")).to_contain_text("broken is off.")
    expect(row).to_contain_text("off")
    shot(page, "mcp")
    row.get_by_role("button", name="Remove").click()
    row.get_by_role("button", name="Press again to remove").click()
    expect(page.locator("#mcp-result")).to_contain_text("broken was removed.")
    expect(page.locator("#mcp-body")).to_contain_text("No MCP servers yet.")
    # companiond's own endpoint: off, turned on (token shown), off again
    expect(page.locator("#mcp-ep-state")).to_have_text("Off.")
    page.click("#mcp-ep-toggle")
    expect(page.locator("#mcp-ep-result")).to_contain_text("The MCP endpoint is on.")
    token = server.get("/api/mcp/endpoint").json()["token"]
    assert len(token) == 64
    expect(page.locator("#mcp-ep-token")).to_have_text(token)
    expect(page.locator("#mcp-ep-state")).to_contain_text("/mcp")
    page.click("#mcp-ep-toggle")
    expect(page.locator("#mcp-ep-result")).to_contain_text("The MCP endpoint is off.")
    assert server.get("/api/mcp/endpoint").json()["enabled"] is False
