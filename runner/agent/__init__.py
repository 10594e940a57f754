"""Agent episodes: prompts, tools, the episode loop, context policy, and the reference / replay agents.

Read in this order: :mod:`~runner.agent.prompts` (what the agent is told), :mod:`~runner.agent.tools` (what it
can do), :mod:`~runner.agent.loop` (the LLM episode), :mod:`~runner.agent.context` (the context policy),
:mod:`~runner.agent.llm` (API calls, retries, text fallback), :mod:`~runner.agent.episode` (how episodes end and
are written).
"""
