"""The MCP gateway: agents (Codex, Claude Code, any MCP client) reach the harness here.

Over HTTP every request needs a bearer token whose sha256 is in the token file; each agent has
capabilities (definitions and tools it may use), budgets (submissions and GPU-seconds per hour)
and a rate limit, and every tool call, refused ones included, is an event in the audit log.
Submissions are evaluated by the real harness; the agent's own claims are never read.
"""
