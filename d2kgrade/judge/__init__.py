"""The LLM judge and the combined score: rubric properties graded by a model through any OpenAI-compatible
chat-completions server, evidence checked against the file, K samples voted, answers cached in SQLite, and the
judge's verdicts fused with static analysis into the 0-100 implementation score.

Modules: :mod:`~d2kgrade.judge.answer` (the answer schema and parser), :mod:`~d2kgrade.judge.prompts` (templates,
delimiting), :mod:`~d2kgrade.judge.evidence` (quote checking), :mod:`~d2kgrade.judge.client` (retries, fallback),
:mod:`~d2kgrade.judge.cache`, :mod:`~d2kgrade.judge.usage` (tokens, cost), :mod:`~d2kgrade.judge.vote`,
:mod:`~d2kgrade.judge.fusion` (the fusion rule) and :mod:`~d2kgrade.judge.run` (a whole run). ``openai`` is
imported only when a client is made, so importing this package stays cheap.
"""

from d2kgrade.judge.fusion import FUSION_RULE_VERSION, fuse_file, fuse_property
from d2kgrade.judge.run import FileResult, JudgeItem, JudgeRun, judge_files
from d2kgrade.judge.settings import JudgeConfig

__all__ = ["FUSION_RULE_VERSION", "FileResult", "JudgeConfig", "JudgeItem", "JudgeRun", "fuse_file",
           "fuse_property", "judge_files"]
