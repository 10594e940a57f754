"""The settings of a run: one frozen model, resolved once from defaults < config file < environment < flags.

The config file is TOML (``--config FILE``): the field names below, at the top level or under ``[run]``.
Environment: ``D2KGRADE_MODEL``, ``D2KGRADE_BASE_URL`` (the API key is never a setting: it comes from
``D2KGRADE_API_KEY`` or ``OPENAI_API_KEY`` and is never written anywhere).

Resuming a run directory compares the new settings with the stored ones field by field (:func:`merge_for_resume`):

- *identity* fields decide what an episode is (model, budgets, guidance level, device, context policy...): they
  must be equal, or the run's episodes would not be comparable;
- *extent* fields (tasks, arms, seeds) may differ: the run's plan becomes the union, and this session runs the
  episodes it names that are not done;
- *operational* fields (endpoint URL, executor, GPUs, concurrency, retries) may change freely.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from d2kgrade.errors import Problem, SpecError, UserError
from d2kgrade.io import problems_from_validation

Arm = Literal["unguided", "guided", "propose"]
ARM_CHOICES = ("paired", "unguided", "guided", "propose")


class RunConfig(BaseModel):
    """Everything that defines a run. Stored with the run and with every episode."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    agent: Literal["llm", "reference", "replay"] = "llm"
    """Who writes the kernels: an LLM through the chat API, the expert references, or another run's submissions."""
    model: str | None = None
    """Model name sent to the API (``--agent llm``); ``reference`` / ``replay`` runs fill it themselves."""
    base_url: str | None = None
    """OpenAI-compatible endpoint (``http://host:8000/v1``); None means the client's default."""
    tasks: list[str] = ["all"]
    """Task ids, or ``["all"]``; resolved against the suite when the run is planned."""
    arms: list[Arm] = ["unguided", "guided"]
    """Arms to run: ``paired`` on the command line means unguided + guided."""
    guidance: Literal["L1", "L1-L2", "all"] = "all"
    """Guidance levels shown in the guided arm."""
    seeds: int = Field(default=1, ge=1, le=1000)
    """Episodes per (task, arm): seeds 0..N-1. Paired arms share a seed and so the hidden workload."""
    max_turns: int = Field(default=350, ge=2)
    """Model calls per episode, the design note included."""
    max_wall_min: float | None = Field(default=None, gt=0)
    """Wall-clock budget per episode, in minutes (evaluations included)."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Token budget per episode: prompt plus completion tokens over all calls."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """``max_tokens`` of each request; None leaves it to the server."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature; None leaves it to the server."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Nucleus sampling ``top_p``; None leaves it to the server."""
    sampling_seed: int | None = Field(default=None, ge=0)
    """Seed sent with every request (``--seed``), plus the episode's seed index; None sends none. Servers treat it
    as best effort."""
    tool_mode: Literal["auto", "native", "text"] = "auto"
    """``native``: OpenAI function calling; ``text``: fenced ```tool blocks in the text; ``auto``: native, falling
    back to text for the rest of the episode when the server refuses the ``tools`` parameter."""
    device: Literal["cpu", "cuda"] | None = None
    """Where kernels are evaluated; None: cuda when a GPU is visible, else cpu (Triton interpreter, smoke only)."""
    keep_recent_results: int = Field(default=8, ge=1)
    """Context policy: tool results of the last this many tool calls are shown in full; older ones as one line."""
    max_context_chars: int = Field(default=360_000, ge=20_000)
    """Context policy: beyond this many characters (~4 per token) the oldest turns are dropped from the request."""
    max_tool_output_chars: int = Field(default=12_000, ge=1_000)
    """A tool output longer than this is trimmed (head and tail kept)."""
    price_in_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million prompt tokens; None makes cost NaN."""
    price_out_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million completion tokens."""
    from_run: str | None = None
    """``--agent replay``: the run directory whose submissions are re-evaluated."""
    eval_timeout_s: float | None = Field(default=None, gt=0)
    """Timeout of one evaluation; None uses the evaluator's default."""
    # ---- operational: may change between sessions of one run
    executor: Literal["local", "ray"] = "local"
    """``local``: threads on this machine; ``ray``: tasks on a Ray cluster."""
    address: str | None = None
    """Ray cluster address (``auto``, ``ray://head:10001``); None starts a local cluster."""
    gpus: list[int] | None = None
    """GPU indices to evaluate on (one lane each); None: every visible GPU."""
    cpu_lanes: int = Field(default=2, ge=1)
    """Evaluation lanes on CPU (each evaluation is a subprocess under the Triton interpreter)."""
    concurrency: int = Field(default=8, ge=1)
    """Episodes in flight at once (their time is mostly waiting on the model)."""
    request_timeout_s: float = Field(default=600.0, gt=0)
    """Timeout of one API request."""
    api_retries: int = Field(default=6, ge=0)
    """Retries of a request after 429, 5xx, timeouts and connection errors."""
    backoff_s: float = Field(default=2.0, ge=0)
    """First retry delay; doubles per retry (with jitter), capped by ``backoff_max_s``."""
    backoff_max_s: float = Field(default=120.0, ge=0)
    """Longest retry delay (a server's Retry-After is honoured up to this)."""

    @field_validator("arms", mode="before")
    @classmethod
    def _expand_arms(cls, v: Any) -> Any:
        items = v.split(",") if isinstance(v, str) else list(v)
        out: list[str] = []
        for a in (str(x).strip() for x in items):
            for arm in (("unguided", "guided") if a == "paired" else (a,)):
                if arm not in out:
                    out.append(arm)
        return out

    @field_validator("tasks", mode="before")
    @classmethod
    def _split_tasks(cls, v: Any) -> Any:
        items = v.split(",") if isinstance(v, str) else list(v)
        return [str(x).strip() for x in items if str(x).strip()] or ["all"]

    @model_validator(mode="after")
    def _agent_needs(self) -> RunConfig:
        if self.agent == "llm" and not self.model:
            raise ValueError("--agent llm needs --model NAME (or model = \"...\" in the config file)")
        if self.agent == "replay" and not self.from_run:
            raise ValueError("--agent replay needs --from RUN_DIR")
        if not self.arms:
            raise ValueError("no arm to run")
        return self


IDENTITY_FIELDS = ("agent", "model", "guidance", "max_turns", "max_wall_min", "max_tokens", "max_output_tokens",
                   "temperature", "top_p", "sampling_seed", "tool_mode", "device", "keep_recent_results",
                   "max_context_chars", "max_tool_output_chars", "price_in_per_mtok", "price_out_per_mtok", "from_run", "eval_timeout_s")
EXTENT_FIELDS = ("tasks", "arms", "seeds")
OPERATIONAL_FIELDS = ("base_url", "executor", "address", "gpus", "cpu_lanes", "concurrency", "request_timeout_s",
                      "api_retries", "backoff_s", "backoff_max_s")
assert set(IDENTITY_FIELDS + EXTENT_FIELDS + OPERATIONAL_FIELDS) == set(RunConfig.model_fields)

ENV_FIELDS = {"D2KGRADE_MODEL": "model", "D2KGRADE_BASE_URL": "base_url"}


def read_config_file(path: Path) -> dict[str, Any]:
    """Settings from a TOML file (top level, or the ``[run]`` table)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: config file not found")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    if isinstance(data.get("run"), dict):
        data = data["run"]
    unknown = sorted(set(data) - set(RunConfig.model_fields))
    if unknown:
        raise UserError(f"{path}: unknown setting(s) {unknown}; known: {sorted(RunConfig.model_fields)}")
    return data


def resolve_config(config_file: Path | None = None, flags: dict[str, Any] | None = None,
                   environ: dict[str, str] | None = None) -> RunConfig:
    """Defaults < config file < environment < flags (None flags are unset)."""
    environ = dict(os.environ) if environ is None else environ
    data: dict[str, Any] = {}
    source = "settings"
    if config_file is not None:
        data.update(read_config_file(config_file))
        source = str(config_file)
    for var, field in ENV_FIELDS.items():
        if environ.get(var):
            data[field] = environ[var]
    data.update({k: v for k, v in (flags or {}).items() if v is not None})
    if data.get("agent") in ("reference", "replay"):
        if (flags or {}).get("model") is not None:
            raise UserError(f"--model is for --agent llm; --agent {data['agent']} takes its model from "
                            + ("the references" if data["agent"] == "reference" else "the replayed run"))
        data.pop("model", None)  # e.g. D2KGRADE_MODEL set for llm runs
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation(source, exc)
        for p in problems:
            if p.where.startswith("arms"):
                raise UserError(f"arms must be paired, unguided, guided or propose (comma-separated); "
                                f"{p.message}") from None  # the model-level rules read best as plain sentences
            if p.where == "":
                raise UserError(p.message.removeprefix("Value error, ")) from None
        raise SpecError([Problem(p.file, p.where, p.message.removeprefix("Value error, ")) for p in problems]) \
            from None


def merge_for_resume(stored: dict[str, Any], new: RunConfig) -> RunConfig:
    """The run's config after this session: identity must match, extent is the union, operational is new's.

    Raises:
        UserError: naming every identity field that differs.
    """
    old = RunConfig.model_validate(stored)
    diffs = [f"{f}: the run has {getattr(old, f)!r}, this command {getattr(new, f)!r}"
             for f in IDENTITY_FIELDS if getattr(old, f) != getattr(new, f)]
    if diffs:
        raise UserError("this run directory was started with other settings, so its episodes would not be "
                        "comparable (" + "; ".join(diffs) + "); rerun with the run's settings to resume it, or "
                        "use a new --out")
    tasks = list(dict.fromkeys([*old.tasks, *new.tasks]))
    arms = list(dict.fromkeys([*old.arms, *new.arms]))
    return new.model_copy(update={"tasks": tasks, "arms": arms, "seeds": max(old.seeds, new.seeds)})
