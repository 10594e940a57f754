"""The formats: pydantic v2 models of tasks and rubrics, with a docstring on every field.

Every persisted record carries ``schema_version``. Models forbid unknown keys, so a typo in a task file is an
error, not a silently ignored field. Cross-field rules that need only one file (unique ids, dependencies that
exist and form no cycle, ids that carry the task id) are validators here; rules that join files (a rubric
property for every guidance id) and rules that evaluate formulas per workload live in :mod:`d2kgrade.validate`.

``d2kgrade schema export`` writes the JSON Schema of each top-level model.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from d2kgrade import formulas
from d2kgrade.dtypes import DTYPE_BYTES, FLOAT_DTYPES, tolerance_key

SCHEMA_VERSION = 1

TASK_ID_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
GUIDANCE_ID_RE = re.compile(r"^(?P<task>[a-z][a-z0-9_]*)\.(?P<level>L[123])\.(?P<slug>[a-z0-9]+(-[a-z0-9]+)*)$")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Level = Literal["L1", "L2", "L3"]
LEVELS: tuple[Level, ...] = ("L1", "L2", "L3")
ParamValue = int | float | bool | str


class Model(BaseModel):
    """Base of every format model: unknown keys are errors, attribute docstrings become descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """Return one dependency cycle (as a list of ids, first id repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in edges.get(node, []):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


# --------------------------------------------------------------------------------------------- tasks


class TensorSpec(Model):
    """One input or output tensor of a task."""

    name: str = Field(pattern=NAME_RE.pattern)
    """Python identifier; inputs are passed to ``kernel(...)`` positionally, in the listed order."""
    shape: str
    """Symbolic shape over the workload's parameters, e.g. ``"[M, K/128]"``."""
    dtype: str
    """A dtype name (``bf16``), alternatives that the workload's dtype picks from (``bf16|fp32``), or
    ``same_as_<input>``."""
    dtype_param: str | None = None
    """Name of a workload parameter that picks this tensor's dtype among the alternatives (e.g. ``qdtype``)."""
    description: str = ""
    """What the tensor holds, where the name alone does not say."""

    @field_validator("shape")
    @classmethod
    def _shape_parses(cls, v: str) -> str:
        formulas.shape_dims(v)
        return v

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        if v.startswith("same_as_"):
            return v
        for alt in v.split("|"):
            if alt not in DTYPE_BYTES:
                raise ValueError(f"unknown dtype {alt!r}; expected one of {sorted(DTYPE_BYTES)} or same_as_<input>")
        return v


class Workload(Model):
    """One problem size of a task: parameters plus the dtype that picks among dtype alternatives."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    """Stable snake_case name (part of the catalog contract)."""
    params: dict[str, ParamValue]
    """Values of the shape symbols and of any knob the input maker reads (``causal``, ``dist``...)."""
    dtype: str
    """The workload dtype: resolves ``a|b`` tensor dtypes and gives ``elt`` (bytes per element) to formulas."""
    why: str = ""
    """What this workload tests and why it is hard."""

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        if v not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype {v!r}; expected one of {sorted(DTYPE_BYTES)}")
        return v


FLOOR_RESOURCES: dict[str, str] = {
    "histogram_updates": "keys counted per second by the fastest histogram mechanism measured for the workload's "
                         "bins and key distribution (tl.histogram privatized per program, or relaxed global atomics)",
    "two_pass_bytes": "bytes per second of a row-wise two-pass read (the second pass from L2 where rows fit) of the "
                      "workload's [rows, cols] shape and dtype",
    "gathers": "dependent gathers per second: an int32 index stream, then a 4-byte load at each index, for the "
               "workload's table size and index pattern",
    "scan_steps": "steps per second of the minimal selective-scan recurrence body (FMUL, MUFU.EX2, FMA, FMUL, FMA per "
                  "(t, d, n)) with enough independent chains to fill the GPU",
    "lane_ops": "independent fp32 FMA lane operations per second at full occupancy (the issue rate of simple ALU ops)",
}
"""Rates a derived floor can divide by; ``benchmarks/floor_microbench.py`` measures each per workload."""


class FloorTerm(Model):
    """One resource a kernel cannot avoid: how much of it a call needs (a formula per workload)."""

    resource: str
    """One of :data:`FLOOR_RESOURCES`: the measured rate this count is divided by."""
    count: str
    """Units of the resource one call needs (a formula over the parameters, ``elt`` and derived values)."""
    why: str
    """Why every kernel the guidance admits needs at least this much of it."""

    @field_validator("resource")
    @classmethod
    def _known_resource(cls, v: str) -> str:
        if v not in FLOOR_RESOURCES:
            raise ValueError(f"unknown floor resource {v!r}; expected one of {sorted(FLOOR_RESOURCES)}")
        return v

    @field_validator("count")
    @classmethod
    def _count_parses(cls, v: str) -> str:
        formulas.parse(v)
        return v


class MeasuredFloor(Model):
    """Both floors of one workload on the measuring GPU, as ``benchmarks/floor_microbench.py`` wrote them."""

    roofline_ms: float
    """The roofline floor (bytes, flops and MUFU ops over the measured ceilings) in ms."""
    derived_ms: float
    """``max(roofline_ms, max_i count_i / rate_i)`` in ms."""
    binding: str
    """The resource whose term sets ``derived_ms``, or ``roofline`` where no term exceeds the roofline floor."""
    rates: dict[str, float]
    """Per resource with a nonzero count on this workload, its measured rate (units per second)."""

    @model_validator(mode="after")
    def _consistent(self) -> MeasuredFloor:
        for field, ms in (("roofline_ms", self.roofline_ms), ("derived_ms", self.derived_ms)):
            if not (math.isfinite(ms) and ms > 0):
                raise ValueError(f"{field} must be a positive number of ms, got {ms}")
        if self.binding == "roofline" and self.derived_ms != self.roofline_ms:
            raise ValueError(f"binding 'roofline' needs derived_ms == roofline_ms, got {self.derived_ms} and "
                             f"{self.roofline_ms}")
        if self.binding != "roofline" and not self.derived_ms > self.roofline_ms:
            raise ValueError(f"binding {self.binding!r} needs derived_ms > roofline_ms, got {self.derived_ms} and "
                             f"{self.roofline_ms} (a floor equal to the roofline's binds as 'roofline')")
        if not self.rates:
            raise ValueError("rates: at least one measured rate")
        for resource, rate in self.rates.items():
            if resource not in FLOOR_RESOURCES:
                raise ValueError(f"rates: unknown resource {resource!r}; expected one of {sorted(FLOOR_RESOURCES)}")
            if not (math.isfinite(rate) and rate > 0):
                raise ValueError(f"rates[{resource!r}] must be a positive number of units per second, got {rate}")
        return self


class DerivedFloor(Model):
    """A lower bound from the algorithm the guidance names: ``max(roofline floor, max_i count_i / rate_i)``, each
    rate measured on the GPU for the workload by ``benchmarks/floor_microbench.py``."""

    terms: list[FloorTerm] = Field(min_length=1)
    """The resources each call needs beyond the roofline's bytes, flops and MUFU ops."""
    why: str
    """The derivation in words: which algorithm, which passes, why the roofline floor is out of its reach."""
    measured: dict[str, MeasuredFloor] | None = None
    """Both floors per catalog workload, as measured on ``gpu`` on ``date``; None: not measured yet."""
    source: str | None = None
    """The measurement file (``benchmarks/data/floors_h200.json``) that ``measured`` comes from."""
    gpu: str | None = None
    """The GPU ``measured`` was taken on (the source's ``gpu.name``)."""
    date: datetime.date | None = None
    """The day of the measurement (the source's ``date``)."""

    @model_validator(mode="after")
    def _measured_has_source(self) -> DerivedFloor:
        given = {k: getattr(self, k) is not None for k in ("measured", "source", "gpu", "date")}
        if len(set(given.values())) > 1:
            raise ValueError("derived_floor: measured, source, gpu and date go together (all set, or all null); "
                             f"set: {sorted(k for k, v in given.items() if v)}")
        resources = [t.resource for t in self.terms]
        dup = sorted({r for r in resources if resources.count(r) > 1})
        if dup:
            raise ValueError(f"derived_floor: one term per resource; repeated: {dup}")
        for name, m in (self.measured or {}).items():
            if m.binding != "roofline" and m.binding not in resources:
                raise ValueError(f"derived_floor.measured[{name!r}].binding {m.binding!r} is neither 'roofline' nor "
                                 f"a term's resource ({resources})")
            extra = sorted(set(m.rates) - set(resources))
            if extra:
                raise ValueError(f"derived_floor.measured[{name!r}].rates names {extra}, which are not terms "
                                 f"({resources})")
        return self


class Cost(Model):
    """The cost model: formulas over a workload's parameters (and ``elt``), evaluated per workload."""

    flops: str
    """Floating-point (or integer) operations of one call."""
    bytes: str
    """Compulsory HBM traffic of one call: each input read once and each output written once."""
    mufu: str | None = None
    """Special-function-unit operations (ex2, lg2, rcp, rsqrt, sin/cos), where they can bound the kernel."""
    derived_floor: DerivedFloor | None = None
    """A tighter lower bound than the roofline floor, where the algorithm the guidance names cannot reach it (the
    roofline floor, from ``flops``/``bytes``/``mufu``, stays the one the evaluator reports)."""

    @field_validator("flops", "bytes", "mufu")
    @classmethod
    def _parses(cls, v: str | None) -> str | None:
        if v is not None:
            formulas.parse(v)
        return v


class Evidence(Model):
    """What implementing a guidance item looks like in code, per language."""

    triton: str
    """How the property shows in a Triton kernel."""
    cuda: str
    """How the property shows in CUDA C++."""


class Guidance(Model):
    """One item of expert guidance: an L1 algorithmic insight, L2 dataflow design or L3 low-level trick."""

    id: str = Field(pattern=GUIDANCE_ID_RE.pattern)
    """Stable id ``<task>.<level>.<slug>``; agreement studies join on it, so it is never reused."""
    level: Level
    """L1 algorithmic insight, L2 dataflow / work decomposition, L3 low-level implementation trick."""
    text: str = Field(min_length=1)
    """The guidance as an agent in the guided arm reads it."""
    depends_on: list[str] = []
    """Ids of guidance items of the same task that this one builds on."""
    evidence: Evidence
    """What the property looks like when implemented (for graders, never shown to agents)."""
    deprecated: bool = False
    """A retired item: kept so old results still join, no longer shown or graded."""

    @model_validator(mode="after")
    def _level_matches_id(self) -> Guidance:
        m = GUIDANCE_ID_RE.match(self.id)
        if m and m.group("level") != self.level:
            raise ValueError(f"id {self.id!r} says level {m.group('level')} but level is {self.level}")
        return self


class HiddenDim(Model):
    """Constraints on one parameter of the hidden workload."""

    multiple_of: int = Field(default=1, ge=1)
    """The drawn value is a multiple of this (a kernel may rely on ``K % 128 == 0`` when the task says so)."""
    min: int = Field(default=1, ge=1)
    """Smallest value drawn."""
    max: int | None = None
    """Largest value drawn; None means no bound beyond the perturbation range."""


class HiddenSpec(Model):
    """The evaluator's hidden workload: the smoke workload with some parameters redrawn per run (0.5x-2x;
    0.5x-1.5x on CPU), so a kernel that hard-codes the listed shapes fails."""

    vary: dict[str, HiddenDim]
    """Integer parameters of the smoke workload to redraw, with their constraints; empty: no hidden workload."""


BASELINE_KINDS = ("eager", "compile", "peer")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "max-autotune", "reduce-overhead")


class BaselineCandidate(Model):
    """One thing a user would pick instead of writing the kernel, timed the same way as submissions.

    The best baseline of a workload is the fastest candidate that is available and correct there. Candidates
    are trusted code: the evaluator times them in its own process, never where a submission ran."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Stable name, shown in reports (``eager``, ``compile``, ``sdpa_cudnn``, ``liger``). ``eager`` and
    ``compile`` are the paper's named columns."""
    kind: Literal["eager", "compile", "peer"]
    """``eager``: a PyTorch function run as it is; ``compile``: that function under ``torch.compile(mode=...)``;
    ``peer``: a function calling a library outside PyTorch (available only when ``requires`` imports)."""
    fn: str = Field(default="baseline", pattern=NAME_RE.pattern)
    """The function of ``reference.py`` that runs it, called like ``kernel(*inputs, **scalars)``."""
    mode: Literal["default", "max-autotune-no-cudagraphs", "max-autotune", "reduce-overhead"] | None = None
    """``torch.compile`` mode (``kind: compile`` only; default ``default``)."""
    requires: list[str] = []
    """Importable modules the candidate needs (``liger_kernel``, ``flash_attn``); missing ones make it
    unavailable, which the result says, never an error."""
    device: Literal["cuda", "any"] = "cuda"
    """Where it can run; a CUDA-only candidate is reported unavailable on CPU."""
    vendor: bool = False
    """The vendor library for this task (cuBLAS, cuDNN, FlashAttention through SDPA): the candidates that the
    vendor-ratio figure compares GEMM, convolution and attention references against."""
    description: str = ""
    """What it is, for people (``SDPA forced to the cuDNN backend with sdpa_kernel``)."""

    @model_validator(mode="after")
    def _mode_only_for_compile(self) -> BaselineCandidate:
        if self.kind != "compile" and self.mode is not None:
            raise ValueError(f"baseline {self.name!r}: mode is for kind 'compile' only")
        return self


DEFAULT_BASELINES: tuple[BaselineCandidate, ...] = (
    BaselineCandidate(name="eager", kind="eager", description="the task's PyTorch baseline, eager"),
    BaselineCandidate(name="compile", kind="compile", mode="default",
                      description="the baseline under torch.compile (default mode)"),
    BaselineCandidate(name="compile_max_autotune", kind="compile", mode="max-autotune-no-cudagraphs",
                      description="the baseline under torch.compile(mode='max-autotune-no-cudagraphs')"),
)
"""The candidates of a task that declares none: eager, and torch.compile in two modes."""


class Task(Model):
    """A GPU kernel task: exact semantics, tensors, workloads, tolerances, cost model and guidance."""

    schema_version: Literal[1] = 1
    """Version of this format."""
    id: str = Field(pattern=TASK_ID_RE.pattern)
    """snake_case task id, the same in ``tasks/``, ``rubrics/``, ``references/`` and tests."""
    title: str
    """One-line title."""
    category: str
    """Kind of kernel (normalization, gemm, attention...)."""
    semantics: str
    """Exact semantics in words and the PyTorch reference line; ``reference.py`` implements it."""
    inputs: list[TensorSpec] = Field(min_length=1)
    """Inputs of ``kernel(...)``, in call order."""
    outputs: list[TensorSpec] = Field(min_length=1)
    """Outputs of ``kernel(...)``: one tensor, or a tuple in this order when there are several."""
    bound: Literal["memory", "compute", "mixed"]
    """What limits a good kernel on the target GPU."""
    derived: dict[str, str] = {}
    """Values computed from the parameters (``P: "(H + 2*pad - R)//stride + 1"``), usable in shapes and cost."""
    cost: Cost
    """Flops, minimum bytes (and optionally MUFU ops) as formulas; the roofline floor is derived from them."""
    tolerance: dict[str, Annotated[tuple[float, float], Field()]]
    """Per output storage dtype: ``[atol, rtol]``, meaning ``|out - ref| <= atol + rtol*|ref|`` elementwise."""
    workloads: list[Workload] = Field(min_length=1)
    """The catalog's workloads (the benchmark contract)."""
    smoke: Workload
    """A tiny workload that runs on CPU under the Triton interpreter in seconds (name ``smoke``)."""
    guidance: list[Guidance] = Field(min_length=1)
    """Expert guidance items, L1 to L3, with dependencies."""
    pitfalls: list[str] = []
    """Common mistakes, in words."""
    scalar_args: list[str] = []
    """Workload parameters passed to ``kernel(...)``, ``reference(...)`` and ``baseline(...)`` as keyword
    arguments after the inputs (``causal``, ``k``): values a kernel needs that no input tensor carries."""
    allowed_library_ops: list[str] = []
    """Library kernels (by profiler name substring) a submission may call without breaking the rule that its
    own kernels do the work; empty means none."""
    forbidden_ops: list[str] = []
    """PyTorch calls that compute the task itself, which a submission may not make: dotted names
    (``torch.softmax``, ``torch.nn.functional.softmax``), ``Tensor.<method>`` for that method on any object
    (``Tensor.softmax``), or ``@`` for the matmul operator outside Triton kernels. The evaluator rejects a
    submission that calls one (a static tripwire, with the line) and one whose profile shows the matching ATen op
    (``aten::softmax``, ``aten::_softmax``)."""
    inplace: dict[str, str] = {}
    """Outputs that may be written in place over an input: ``{output: input}`` (``q_out: q``). The evaluator
    accepts a change to that input only when it then holds exactly the returned output; any other write to an
    input is ``input_mutated``. The semantics text must say so too (a test checks both agree)."""
    glue_ops: list[str] = []
    """ATen ops (base names as the profiler reports them, ``index_select``) that this task's semantics make
    data movement, allowed on data-sized tensors beyond the evaluator's movement list."""
    baselines: list[BaselineCandidate] = []
    """What a user would pick instead, each timed like a submission (see :meth:`baseline_candidates`); empty:
    :data:`DEFAULT_BASELINES`."""
    hidden: HiddenSpec | None = None
    """How the evaluator draws the per-run hidden workload from the smoke workload. None: every integer parameter
    that is a whole dimension of an input and whose smoke value is not a power of two is perturbed."""

    @field_validator("derived")
    @classmethod
    def _derived_parse(cls, v: dict[str, str]) -> dict[str, str]:
        for name, text in v.items():
            if not NAME_RE.match(name):
                raise ValueError(f"derived name {name!r} is not an identifier")
            formulas.parse(text)
        return v

    @field_validator("tolerance")
    @classmethod
    def _tolerance_keys(cls, v: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for key, (atol, rtol) in v.items():
            if key not in DTYPE_BYTES and key != "fp8":
                raise ValueError(f"tolerance key {key!r} is not a dtype name")
            if not (math.isfinite(atol) and math.isfinite(rtol)):  # NaN passes every comparison; inf admits anything
                raise ValueError(f"tolerance {key}: atol and rtol must be finite numbers, got [{atol}, {rtol}]")
            if atol < 0 or rtol < 0:
                raise ValueError(f"tolerance {key}: atol and rtol must be >= 0, got [{atol}, {rtol}]")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> Task:
        names = [t.name for t in self.inputs + self.outputs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tensor names must be unique across inputs and outputs; repeated: {dup}")
        input_names = {t.name for t in self.inputs}
        for t in self.inputs + self.outputs:
            if t.dtype.startswith("same_as_") and t.dtype[len("same_as_"):] not in input_names:
                raise ValueError(f"tensor {t.name!r}: dtype {t.dtype!r} names no input of this task")
        wl = [w.name for w in self.workloads]
        dup = sorted({n for n in wl if wl.count(n) > 1})
        if dup:
            raise ValueError(f"workload names must be unique; repeated: {dup}")
        if self.smoke.name != "smoke":
            raise ValueError(f"the smoke workload must be named 'smoke', not {self.smoke.name!r}")
        if "smoke" in wl:
            raise ValueError("'smoke' is reserved for the smoke workload and cannot name a catalog workload")
        for w in [*self.workloads, self.smoke]:
            missing = [a for a in self.scalar_args if a not in w.params]
            if missing:
                raise ValueError(f"workload {w.name!r} lacks the scalar argument(s) {missing} named in scalar_args")
        ids = [g.id for g in self.guidance]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"guidance ids must be unique; repeated: {dup}")
        for g in self.guidance:
            if not g.id.startswith(self.id + "."):
                raise ValueError(f"guidance id {g.id!r} must start with the task id '{self.id}.'")
            for dep in g.depends_on:
                if dep not in ids:
                    raise ValueError(f"guidance {g.id!r} depends on {dep!r}, which is not a guidance id of this task")
                if dep == g.id:
                    raise ValueError(f"guidance {g.id!r} depends on itself")
        cycle = find_cycle({g.id: list(g.depends_on) for g in self.guidance})
        if cycle:
            raise ValueError("guidance dependencies form a cycle: " + " -> ".join(cycle))
        outputs = {t.name: t for t in self.outputs}
        inputs = {t.name: t for t in self.inputs}
        for out_name, in_name in self.inplace.items():
            if out_name not in outputs or in_name not in inputs:
                raise ValueError(f"inplace maps {out_name!r} -> {in_name!r}; expected an output name -> an input name "
                                 f"(outputs: {sorted(outputs)}, inputs: {sorted(inputs)})")
            if outputs[out_name].shape.replace(" ", "") != inputs[in_name].shape.replace(" ", ""):
                raise ValueError(f"inplace {out_name!r} -> {in_name!r}: shapes differ ({outputs[out_name].shape} vs "
                                 f"{inputs[in_name].shape})")
        if len(set(self.inplace.values())) != len(self.inplace):
            raise ValueError("inplace: two outputs may not overwrite the same input")
        cands = [b.name for b in self.baselines]
        dup = sorted({n for n in cands if cands.count(n) > 1})
        if dup:
            raise ValueError(f"baseline names must be unique; repeated: {dup}")
        if self.baselines and "eager" not in cands:
            raise ValueError("baselines must include one named 'eager' (the paper's eager column)")
        floor = self.cost.derived_floor
        unknown = sorted(set((floor.measured or {}) if floor else {}) - set(wl))
        if unknown:
            raise ValueError(f"cost.derived_floor.measured names {unknown}, which are not catalog workloads")
        for term in floor.terms if floor else []:
            for w in [*self.workloads, self.smoke]:
                undefined = sorted(formulas.names(term.count) - set(w.params) - set(self.derived) - {"elt"})
                if undefined:
                    raise ValueError(f"cost.derived_floor term {term.resource!r}: {undefined} not defined on workload "
                                     f"{w.name!r} (a parameter, a derived value or elt)")
        for name in (self.hidden.vary if self.hidden else {}):
            value = self.smoke.params.get(name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"hidden.vary names {name!r}, which is not an integer parameter of the smoke workload")
        return self

    def baseline_candidates(self) -> list[BaselineCandidate]:
        """The declared candidates, or :data:`DEFAULT_BASELINES`."""
        return list(self.baselines) if self.baselines else list(DEFAULT_BASELINES)

    def workload(self, name: str) -> Workload:
        """The workload named ``name`` (``smoke`` included)."""
        for w in [*self.workloads, self.smoke]:
            if w.name == name:
                return w
        raise KeyError(name)

    def active_guidance(self) -> list[Guidance]:
        """Guidance items that are not deprecated."""
        return [g for g in self.guidance if not g.deprecated]

    # The helpers below are shared by the grader (validation, roofline) and the runner (input making).

    def env(self, workload: Workload) -> dict[str, ParamValue]:
        """Names visible to formulas: the parameters, ``elt`` (bytes per element of the workload dtype) and
        the derived values, in declaration order.

        Raises:
            formulas.FormulaError: if a derived formula does not evaluate.
        """
        env: dict[str, ParamValue] = {**workload.params, "elt": DTYPE_BYTES[workload.dtype]}
        for name, text in self.derived.items():
            env[name] = formulas.evaluate(text, env)
        return env

    def tensor_dtypes(self, workload: Workload) -> dict[str, str]:
        """Concrete dtype of every input and output for ``workload``.

        Raises:
            ValueError: if an alternative list does not contain the dtype that should pick from it.
        """
        out: dict[str, str] = {}
        for t in self.inputs + self.outputs:
            if t.dtype.startswith("same_as_"):
                out[t.name] = out[t.dtype[len("same_as_"):]]
                continue
            alts = t.dtype.split("|")
            if len(alts) == 1:
                out[t.name] = alts[0]
                continue
            pick = workload.params.get(t.dtype_param) if t.dtype_param else workload.dtype
            if pick not in alts:
                source = f"parameter {t.dtype_param!r}" if t.dtype_param else "the workload dtype"
                raise ValueError(f"tensor {t.name!r} takes one of {alts}, but {source} is {pick!r}")
            out[t.name] = str(pick)
        return out

    def shapes(self, workload: Workload) -> dict[str, tuple[int, ...]]:
        """Concrete shape of every input and output for ``workload``."""
        env = self.env(workload)
        return {t.name: formulas.eval_shape(t.shape, env) for t in self.inputs + self.outputs}

    def cost_of(self, workload: Workload) -> dict[str, float]:
        """``flops``, ``bytes`` (and ``mufu`` when given) of one call on ``workload``."""
        env = self.env(workload)
        out = {"flops": float(formulas.evaluate(self.cost.flops, env)),
               "bytes": float(formulas.evaluate(self.cost.bytes, env))}
        if self.cost.mufu is not None:
            out["mufu"] = float(formulas.evaluate(self.cost.mufu, env))
        return out

    def derived_floor_counts(self, workload: Workload) -> dict[str, float]:
        """Per resource of ``cost.derived_floor``, the count one call on ``workload`` needs ({} without one)."""
        if self.cost.derived_floor is None:
            return {}
        env = self.env(workload)
        return {t.resource: float(formulas.evaluate(t.count, env)) for t in self.cost.derived_floor.terms}

    def tolerance_for(self, dtype: str) -> tuple[float, float]:
        """``(atol, rtol)`` for outputs stored as ``dtype``; integers default to exact."""
        key = tolerance_key(dtype, self.tolerance)
        if key is not None:
            return self.tolerance[key]
        if dtype not in FLOAT_DTYPES:
            return (0.0, 0.0)
        raise KeyError(dtype)


# --------------------------------------------------------------------------------------------- rubrics


class CheckRef(Model):
    """A named static check (from the check registry) applied with arguments."""

    check: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Registered check name, e.g. ``tl_dot_in_k_loop``."""
    args: dict[str, Any] = {}
    """Keyword arguments of the check."""
    language: Literal["triton", "cuda", "any"] = "any"
    """Which kind of submission the check applies to; others skip it."""
    negate: bool = False
    """Evidence of the property is the check *failing* (e.g. 'no E[x^2] accumulation')."""


class StaticSpec(Model):
    """How static analysis decides one property."""

    checks: list[CheckRef] = []
    """Checks over the submission's facts. Empty means static analysis has no opinion (``unknown``)."""
    combine: Literal["all", "any"] = "all"
    """Present when all (or any) applicable checks pass."""


class JudgeSpec(Model):
    """The LLM judge's question for one property, with what counts as met and as not met."""

    question: str = Field(min_length=1)
    """A yes/no question about the code (or the design note) that decides the property."""
    met: str = Field(min_length=1)
    """What the code must show for ``met``."""
    not_met: str = Field(min_length=1)
    """What makes it ``not_met`` even when it superficially looks present."""


class TransformRef(Model):
    """A named ablation transform (from ``d2kgrade.ablate.registry``) applied with arguments."""

    transform: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Registered transform name, e.g. ``strip_eviction_hints``."""
    args: dict[str, Any] = {}
    """Keyword arguments of the transform."""

    @field_validator("transform")
    @classmethod
    def _known(cls, v: str) -> str:
        from d2kgrade.ablate.registry import TRANSFORM_NAMES  # names only: no libcst, no torch

        if v not in TRANSFORM_NAMES:
            raise ValueError(f"unknown ablation transform {v!r}; known: {', '.join(sorted(TRANSFORM_NAMES))}")
        return v


class AblationSpec(Model):
    """How ``d2kgrade ablate`` removes one property from a kernel: transforms, or why there is none."""

    transforms: list[TransformRef] = []
    """Applied in order to the same file; together they make the one ablated variant of the property."""
    require: Literal["all", "any"] = "all"
    """``all``: every transform must find something to change, else the property has no variant in that file;
    ``any``: the ones that apply are enough."""
    none: str | None = Field(default=None, min_length=1)
    """Why the property has no faithful transform (it is the algorithm itself, or needed for correctness)."""

    @model_validator(mode="after")
    def _one_of(self) -> AblationSpec:
        if bool(self.transforms) == (self.none is not None):
            raise ValueError("give either transforms or none (the reason there is no transform), not both or neither")
        return self


class Property(Model):
    """One gradable design property; its id is a guidance id of the task."""

    id: str = Field(pattern=GUIDANCE_ID_RE.pattern)
    """The guidance id this property grades."""
    level: Level
    """Same as the guidance item's level."""
    weight: float = Field(default=1.0, gt=0)
    """Relative weight inside its level for the 0-100 implementation score."""
    static: StaticSpec = StaticSpec()
    """Static checks that evidence the property."""
    judge: JudgeSpec
    """The judge question."""
    deprecated: bool = False
    """Retired with its guidance item; kept so old grades still join."""
    ablation: AblationSpec | None = None
    """How to remove the property for ``d2kgrade ablate`` (absent: not yet decided)."""
    workloads: list[str] | None = Field(default=None, min_length=1)
    """Names of the task's workloads the property concerns, when its guidance is for some sizes only (a split-KV
    path for the long contexts); the static rater then judges only the host paths that serve one of them. Absent:
    every catalog workload. Checked against the task's workload names by ``d2kgrade tasks validate``."""


class Rubric(Model):
    """The design properties of one task, one per guidance id."""

    schema_version: Literal[1] = 1
    """Version of this format."""
    task: str = Field(pattern=TASK_ID_RE.pattern)
    """Task id."""
    version: int = Field(default=1, ge=1)
    """Rubric content version: bump on any change that could change a grade (it keys the judge cache)."""
    level_weights: dict[Level, float] = {"L1": 40.0, "L2": 35.0, "L3": 25.0}
    """Points of each level in the 0-100 score (they must sum to 100)."""
    properties: list[Property] = Field(min_length=1)
    """One property per guidance id of the task."""

    @field_validator("level_weights")
    @classmethod
    def _sum_100(cls, v: dict[Level, float]) -> dict[Level, float]:
        if set(v) != set(LEVELS):
            raise ValueError(f"level_weights must name exactly {list(LEVELS)}")
        if any(x < 0 for x in v.values()) or abs(sum(v.values()) - 100.0) > 1e-9:
            raise ValueError(f"level_weights must be >= 0 and sum to 100, got {dict(v)}")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> Rubric:
        ids = [p.id for p in self.properties]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"property ids must be unique; repeated: {dup}")
        for p in self.properties:
            if not p.id.startswith(self.task + "."):
                raise ValueError(f"property id {p.id!r} must start with the task id '{self.task}.'")
            m = GUIDANCE_ID_RE.match(p.id)
            if m and m.group("level") != p.level:
                raise ValueError(f"property {p.id!r}: id says {m.group('level')} but level is {p.level}")
        return self


EXPORTED_MODELS: dict[str, str] = {
    "task": "d2kgrade.schema:Task",
    "rubric": "d2kgrade.schema:Rubric",
    "eval_result": "d2kgrade.records:EvalResult",
    "file_grade": "d2kgrade.grades:FileGrade",
}
"""Top-level formats that ``d2kgrade schema export`` writes, as ``module:Class`` (imported on export, so a
record model elsewhere is listed here without an import cycle)."""


def exported_models() -> dict[str, type[BaseModel]]:
    """Resolve :data:`EXPORTED_MODELS` to classes."""
    import importlib

    out = {}
    for name, spec in EXPORTED_MODELS.items():
        module, _, cls = spec.partition(":")
        out[name] = getattr(importlib.import_module(module), cls)
    return out


# --------------------------------------------------------------------------------------------- rendering

GuidanceArm = Literal["none", "L1", "L1-L2", "all"]
GUIDANCE_ARMS: dict[str, tuple[Level, ...]] = {"none": (), "L1": ("L1",), "L1-L2": ("L1", "L2"), "all": LEVELS}


def render_task(task: Task, guidance: str = "none") -> str:
    """The task as an agent sees it, in Markdown: ``d2kgrade tasks show`` and ``d2kgrade run`` both use this.

    The unguided arm (``none``) gets semantics, tensors, workload sizes, tolerances and the cost model. Guided
    arms add the guidance items of their levels. A workload's ``why`` and the pitfalls carry design hints
    ("needs several rows per program"), so they are shown only with ``all``: otherwise the unguided arm would
    receive guidance, and the arms would differ in more than the guidance levels.
    """
    if guidance not in GUIDANCE_ARMS:
        raise ValueError(f"guidance must be one of {list(GUIDANCE_ARMS)}, got {guidance!r}")
    levels = GUIDANCE_ARMS[guidance]
    lines = [f"# Task `{task.id}`: {task.title}", "", f"Category: {task.category}; bound: {task.bound}.", "",
             "## Semantics", "", task.semantics.strip(), "", "## Signature", "",
             "Write one Python file defining `kernel(" + ", ".join(t.name for t in task.inputs)
             + "".join(f", *, {a}" if i == 0 else f", {a}" for i, a in enumerate(task.scalar_args)) + ")`, "
             "which returns " + (f"`{task.outputs[0].name}`" if len(task.outputs) == 1 else
                                  "the tuple `(" + ", ".join(t.name for t in task.outputs) + ")`") + ".", ""]
    lines += ["| tensor | role | shape | dtype |", "|---|---|---|---|"]
    lines += [f"| `{t.name}` | input | `{t.shape}` | {t.dtype} |" for t in task.inputs]
    lines += [f"| `{t.name}` | output | `{t.shape}` | {t.dtype} |" for t in task.outputs]
    if task.derived:
        lines += ["", "Derived sizes: " + ", ".join(f"`{k} = {v}`" for k, v in task.derived.items()) + "."]
    lines += ["", "## Workloads", "", "| name | dtype | parameters |" + (" why |" if guidance == "all" else ""),
              "|---|---|---|" + ("---|" if guidance == "all" else "")]
    for w in task.workloads:
        params = ", ".join(f"{k}={v}" for k, v in w.params.items())
        lines.append(f"| `{w.name}` | {w.dtype} | {params} |" + (f" {w.why} |" if guidance == "all" else ""))
    lines += ["", "## Correctness and cost", "",
              "Outputs are compared elementwise with |out - ref| <= atol + rtol*|ref| against a float64 reference; "
              "NaN or Inf where the reference is finite fails.", ""]
    lines += [f"- {k}: atol={a:g}, rtol={r:g}" for k, (a, r) in task.tolerance.items()]
    lines += ["", f"Cost model (elt = bytes per element of the workload dtype): flops = `{task.cost.flops}`, "
              f"bytes = `{task.cost.bytes}`" + (f", MUFU ops = `{task.cost.mufu}`" if task.cost.mufu else "") + "."]
    if levels:
        lines += ["", "## Expert guidance", ""]
        names = {"L1": "algorithmic insight", "L2": "dataflow design", "L3": "low-level tricks"}
        for level in levels:
            items = [g for g in task.active_guidance() if g.level == level]
            lines += [f"### {level}: {names[level]}", ""]
            for g in items:
                deps = [d for d in g.depends_on]
                after = f" (builds on: {', '.join(f'`{d}`' for d in deps)})" if deps else ""
                lines.append(f"- `{g.id}`{after}: {g.text.strip()}")
            lines.append("")
        if guidance == "all" and task.pitfalls:
            lines += ["### Pitfalls", ""] + [f"- {p}" for p in task.pitfalls] + [""]
    return "\n".join(lines).rstrip() + "\n"
