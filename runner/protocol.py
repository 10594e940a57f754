"""The messages between the evaluator and the kernel host, as strict pydantic models.

The kernel host is the only process that runs submission code, so everything it says is data from a hostile
party: the evaluator parses each reply with :func:`parse_reply`, which refuses unknown kinds, unknown or missing
fields, wrong types, oversized strings and lists, and replies that do not answer the request in flight (another
call id, another kind). A refused reply fails the submission (``crashed``: the host sent a malformed message);
nothing in a reply can change what the evaluator decides about outputs, which it reads from shared memory and
compares itself. Nothing that authenticates messages lives in the kernel host: there is nothing to forge, only
data to validate.

Requests (evaluator to host) are plain dicts built by :mod:`runner.host_client`; the host trusts them, since they
come from a process that never ran submission code.

Wire format: one JSON object per ``SOCK_SEQPACKET`` message (at most :data:`MAX_MESSAGE` bytes), file descriptors
of shared-memory buffers beside it as ``SCM_RIGHTS`` (:mod:`runner.shm`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

MAX_MESSAGE = 4 << 20
"""Largest message either side sends (a profiled call's kernel table included)."""
MAX_TEXT = 8000
"""Longest error message or traceback a reply may carry (the host trims to this)."""

Text = Annotated[str, Field(max_length=MAX_TEXT)]
Name = Annotated[str, Field(max_length=400)]
HostStatus = Literal["compile_error", "runtime_error", "crashed", "unsupported_on_cpu"]


class Reply(BaseModel):
    """Base of every message from the kernel host: strict types, no unknown keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class HostError(Reply):
    """An exception raised by submission code, as the host classified it."""

    status: HostStatus
    """What it means for the submission (the evaluator checks it is a status the host may claim)."""
    fatal: bool
    """The CUDA context is dead, or the host cannot go on: no further calls will be made."""
    message: Text
    """The exception and its traceback from the first submission frame, trimmed (redacted by the caller)."""
    limitation: Annotated[str, Field(max_length=500)] | None = None
    """For ``unsupported_on_cpu``: which Triton-interpreter limitation it hit."""


class Ready(Reply):
    """The host is up: privileges dropped, harness imported, audit hook installed, warm-up kernel run."""

    kind: Literal["ready"]
    pid: int
    """The host's own pid, for the record (the evaluator was told the real one by the job leader)."""
    uid: int
    """The uid it runs as."""
    threads: int = Field(ge=1)
    """Native threads after the warm-up (``/proc/self/task``), the baseline the evaluator counts against."""
    sandbox: Annotated[str, Field(max_length=1000)]
    """What isolation the host could put in place (for the result's ``environment.sandbox``)."""


class Loaded(Reply):
    """Answer to ``load``: the submission was imported, or why not."""

    kind: Literal["loaded"]
    ok: bool
    error: HostError | None = None
    seconds: float = Field(ge=0)
    violations: list[Annotated[str, Field(max_length=600)]] = Field(default_factory=list, max_length=64)
    """What the audit hook refused since the last reply (:mod:`runner.audit`)."""

    @model_validator(mode="after")
    def _error_iff_not_ok(self) -> Loaded:
        if self.ok == (self.error is not None):
            raise ValueError("a loaded reply carries an error exactly when ok is false")
        return self


class Registered(Reply):
    """Answer to ``buffers``: the shared buffers are mapped."""

    kind: Literal["registered"]
    ids: list[int] = Field(max_length=4096)


class OutputInfo(Reply):
    """What the kernel returned in one position, described by the host before it copied anything."""

    kind: Literal["tensor", "none", "other"]
    """A ``torch.Tensor`` (any subclass), ``None``, or anything else."""
    type_name: Name
    """The object's type, as ``module.qualname`` (never its repr)."""
    plain: bool = False
    """Exactly ``torch.Tensor``, strided, not meta, not nested."""
    dtype: Name | None = None
    shape: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, max_length=16)
    device: Name | None = None
    copied: bool = False
    """The host copied it into the evaluator's output slot (only a plain tensor of the declared dtype and
    shape on the task's device is copied)."""
    alias_of: int | None = None
    """Index of the input whose storage it shares (written in place), if any."""


class OpCounts(Reply):
    """ATen ops that ran during a call, by name, with the work each did (elements written)."""

    ops: dict[Name, Annotated[int, Field(ge=0)]] = Field(default_factory=dict, max_length=4096)
    interp_ops: dict[Name, Annotated[int, Field(ge=0)]] = Field(default_factory=dict, max_length=4096)
    """Ops inside a Triton interpreter launch (the interpreter's own host copies)."""


class KernelStat(Reply):
    count: int = Field(ge=0)
    us: float = Field(ge=0)


class Called(Reply):
    """Answer to ``call``: one kernel call on the buffers the evaluator filled."""

    kind: Literal["called"]
    call_id: int
    ok: bool
    """The call returned (its outputs may still be wrong: the evaluator decides)."""
    error: HostError | None = None
    outputs: list[OutputInfo] = Field(default_factory=list, max_length=64)
    returned: Literal["tensor", "tuple", "list", "none", "other"] = "other"
    """The shape of the return value as a whole."""
    ops: OpCounts = OpCounts()
    kernels: dict[Name, KernelStat] | None = Field(default=None, max_length=4096)
    """GPU kernels of a profiled call (None when the call was not profiled, or on CPU)."""
    own_launches: int | None = Field(default=None, ge=0)
    """Triton interpreter launches of the submission's own kernels (CPU)."""
    host_ms: float = Field(default=0.0, ge=0)
    fingerprints: list[int] | None = Field(default=None, max_length=64)
    """Keyed checksums of the inputs the evaluator asked about (huge ones it does not copy back), after the call."""
    violations: list[Annotated[str, Field(max_length=600)]] = Field(default_factory=list, max_length=64)
    """What the audit hook refused since the last reply (:mod:`runner.audit`)."""

    @model_validator(mode="after")
    def _error_iff_not_ok(self) -> Called:
        if self.ok == (self.error is not None):
            raise ValueError("a called reply carries an error exactly when ok is false")
        return self


class Timed(Reply):
    """Answer to ``batch``: event-timed calls queued back to back (see :mod:`runner.timing`)."""

    kind: Literal["timed"]
    batch_id: int
    ok: bool
    error: HostError | None = None
    samples_ms: list[Annotated[float, Field(ge=0)]] = Field(default_factory=list, max_length=100_000)
    """One CUDA-event time per rep, in rep order."""
    screened: list[Annotated[str, Field(max_length=500)]] = Field(default_factory=list, max_length=64)
    """Problems the host saw in returned objects without copying them (wrong dtype, not a tensor...)."""
    host_ms_per_rep: float = Field(default=0.0, ge=0)
    """Host time to queue one rep (what the pad is sized from)."""
    wall: dict[Literal["wall_ms", "event_ms", "calls"], float] | None = None
    """The host-clock cross-check of back-to-back calls (a batch with ``wall_rounds``)."""
    pad_ms: float = Field(default=0.0, ge=0)
    ops: OpCounts = OpCounts()
    """The op record of every call in the batch, merged."""
    kernels: None = None
    own_launches: int | None = Field(default=None, ge=0)
    fingerprints: list[int] | None = Field(default=None, max_length=64)
    """Keyed checksums of the shared (huge) inputs after the batch."""
    violations: list[Annotated[str, Field(max_length=600)]] = Field(default_factory=list, max_length=64)
    """What the audit hook refused since the last reply (:mod:`runner.audit`)."""

    @model_validator(mode="after")
    def _error_iff_not_ok(self) -> Timed:
        if self.ok == (self.error is not None):
            raise ValueError("a timed reply carries an error exactly when ok is false")
        return self


class Verified(Reply):
    """Answer to ``verify``: keyed checksums of every staged rep's outputs (the named rows copied to the slots)."""

    kind: Literal["verified"]
    batch_id: int
    digests: list[list[int]] = Field(max_length=100_000)
    """Per rep, one checksum per output."""


class Fingerprinted(Reply):
    """Answer to ``fingerprint``: keyed checksums of huge inputs the host holds (see :mod:`runner.huge_inputs`)."""

    kind: Literal["fingerprinted"]
    values: list[int] = Field(max_length=64)


class Released(Reply):
    """Answer to ``release``: the buffers are unmapped."""

    kind: Literal["released"]
    ids: list[int] = Field(max_length=4096)


class Bye(Reply):
    kind: Literal["bye"]


AnyReply = Ready | Loaded | Registered | Called | Timed | Verified | Fingerprinted | Released | Bye
_BY_KIND: dict[str, type[Reply]] = {"ready": Ready, "loaded": Loaded, "registered": Registered, "called": Called,
                                    "timed": Timed, "verified": Verified, "fingerprinted": Fingerprinted,
                                    "released": Released, "bye": Bye}


class ProtocolError(Exception):
    """A reply that is not what the request in flight allows: the submission fails as ``crashed``."""


def parse_reply(data: bytes, expect: str, *, call_id: int | None = None) -> Any:
    """Validate one message from the host as the reply of kind ``expect`` (and ``call_id``, when given).

    Raises:
        ProtocolError: malformed JSON, another kind, a field that is missing, unknown, of the wrong type or too
            large, or an answer to another call.
    """
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"a {len(data)}-byte message (at most {MAX_MESSAGE})")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}"[:300]) from None
    if not isinstance(raw, dict) or raw.get("kind") != expect:
        kind = raw.get("kind") if isinstance(raw, dict) else type(raw).__name__
        raise ProtocolError(f"expected a {expect!r} reply, got {str(kind)[:60]!r}")
    try:
        msg = _BY_KIND[expect].model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ProtocolError(f"malformed {expect!r} reply: {where}: {first['msg']}"[:400]) from None
    if call_id is not None and getattr(msg, "call_id", getattr(msg, "batch_id", None)) != call_id:
        raise ProtocolError(f"a reply to call {getattr(msg, 'call_id', getattr(msg, 'batch_id', None))}, "
                            f"expected call {call_id}")
    return msg


def encode(msg: dict[str, Any]) -> bytes:
    """One message on the wire (both sides)."""
    data = json.dumps(msg, separators=(",", ":"), default=_default).encode()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
    return data


def _default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


__all__ = ["Ready", "Loaded", "Registered", "Called", "Timed", "Verified", "Fingerprinted", "Released", "Bye", "OutputInfo", "HostError",
           "OpCounts", "KernelStat", "ProtocolError", "parse_reply", "encode", "MAX_MESSAGE", "MAX_TEXT"]
