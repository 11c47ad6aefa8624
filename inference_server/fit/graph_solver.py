# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit's solver for GPUs: fixed-length L-BFGS steps with no host reads, each step one
CUDA graph replay.

Why: group.py's solver (torch.optim.LBFGS per person, strong-Wolfe line search) reads the loss
back to the host at every evaluation, and an evaluation is ~1,450 small kernels launched one by
one from Python: on an H100 the GPU did 2.4 ms of work per 37 ms evaluation, and a fit took
4.2-4.9 s per person, slower than that machine's CPU.

Here the people's L-BFGS run as tensors, in lockstep, and the host only enqueues:
- the direction is the two-loop recursion over a fixed-size history per person (a rolled buffer:
  pairs not kept weigh 0), the variables a stage holds masked out;
- the line search is parallel: the loss and gradient at ``STEPS`` step lengths along the
  direction are rows of one batched evaluation (launch-bound: eight rows cost what one does);
  per person the step with the lowest loss is taken if it is lower than now, else none and the
  history is cleared (the longest step with sufficient decrease, Armijo's rule, converged less
  per step: on the sitting scene joints 0.51 / 1.32 cm mean / max against 0.29 / 0.80);
- a pair enters the history where its curvature s.y is positive.
Nothing reads the device, so on CUDA a whole step (and the evaluation that starts a round) is
captured once as a CUDA graph and replayed; graphs are kept per group shape (people, kind of
depth, padded numbers of points and pixels: ``BUCKET``), so the photos of a warm server reuse
them. On the CPU the same arithmetic runs eagerly (tests; slower there than group.py's solver,
since every evaluation has STEPS rows).

The stages, starts, correspondences and fold tries are the solver's (solver.py): this replaces
only group.Group.run_lbfgs (FitSettings.solver = "graph").
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict

import torch

from .group import Group, losses_of
from .terms import GroupTerms

log = logging.getLogger(__name__)

# Step lengths tried in parallel along each L-BFGS direction, longest first (1 is the quasi-
# Newton step; the short ones catch a first step of a round, whose scale is a guess).
STEPS = (2.0, 1.0, 0.5, 0.25, 0.1, 0.03, 0.01, 0.001)
HISTORY = 20  # curvature pairs per person (group.py's L-BFGS keeps 20)
BUCKET = 256  # points and silhouette pixels padded to multiples of this (graphs reused)
GRAPHS_KEPT = 8  # captured steps kept per process (each holds its group's buffers)
# On CUDA, steps are captured as graphs unless SAPIENS_FIT_CUDA_GRAPHS=0 (then replayed eagerly:
# the same arithmetic, each kernel launched from Python).
CAPTURE = os.environ.get("SAPIENS_FIT_CUDA_GRAPHS", "1") != "0"

_FIELDS = ("pose_free", "pose_fingers", "shape_logit", "root_rot", "root_t", "log_depth_scale", "depth_shift")


class Layout:
    """Where each variable of a person lies in its flat row [n]."""

    def __init__(self, fitter):
        sizes = {"pose_free": len(fitter._free) * 3, "pose_fingers": len(fitter._fingers) * 3, "shape_logit": 6,
                 "root_rot": 3, "root_t": 3, "log_depth_scale": 1, "depth_shift": 1}
        self.slices, at = {}, 0
        for name in _FIELDS:
            self.slices[name] = slice(at, at + sizes[name])
            at += sizes[name]
        self.n = at

    def pack(self, problems: list) -> torch.Tensor:
        with torch.no_grad():
            return torch.stack([torch.cat([getattr(p, k).detach().reshape(-1) for k in _FIELDS]) for p in problems])

    def unpack(self, x: torch.Tensor, problems: list) -> None:
        """The rows ``x`` [P,n] into the problems' variables (their starts, results and
        correspondences read those)."""
        with torch.no_grad():
            for row, p in zip(x, problems):
                for k in _FIELDS:
                    leaf = getattr(p, k)
                    leaf.copy_(row[self.slices[k]].reshape(leaf.shape))

    def mask(self, problems: list, dense: bool, shape: bool, shape_round: bool) -> torch.Tensor:
        """[P,n]: 1 where a stage moves the variable (group.Group.run_lbfgs's choice)."""
        rows = []
        for p in problems:
            if shape_round:
                free = {"shape_logit", "root_t", "root_rot"}
            else:
                free = {k for g in p._params(dense) for v in g["params"] for k in _FIELDS if getattr(p, k) is v}
                if not shape:
                    free.discard("shape_logit")
            row = torch.zeros(self.n, dtype=p.dt, device=p.dev)
            for k in free:
                row[self.slices[k]] = 1.0
            rows.append(row)
        return torch.stack(rows)

    def variables(self, terms: GroupTerms, x: torch.Tensor):
        """terms.Variables of rows ``x`` [Q,n]."""
        q, sl = len(x), self.slices
        return terms.variables_of(x[:, sl["pose_free"]].reshape(q, -1, 3), x[:, sl["pose_fingers"]].reshape(q, -1, 3),
                                  x[:, sl["shape_logit"]], x[:, sl["root_rot"]], x[:, sl["root_t"]],
                                  x[:, sl["log_depth_scale"]][:, 0], x[:, sl["depth_shift"]][:, 0])


class _State:
    """One group's solver state on the device, updated in place (a captured graph reads and
    writes these very tensors)."""

    def __init__(self, p: int, n: int, dtype, device):
        z = lambda *s: torch.zeros(s, dtype=dtype, device=device)  # noqa: E731
        self.x, self.g, self.mask = z(p, n), z(p, n), z(p, n)
        self.f = z(p)
        self.s, self.y, self.rho = z(p, HISTORY, n), z(p, HISTORY, n), z(p, HISTORY)
        self.steps = torch.tensor(STEPS, dtype=dtype, device=device)

    def clear_history(self) -> None:
        self.rho.zero_()


class _Solver:
    """The steps for one group shape: its terms over STEPS rows per person, its state, and on
    CUDA its captured graphs."""

    def __init__(self, group: "GraphGroup", dense: bool):
        self.dense = dense
        self.layout = group.layout
        self.body, self.sample = group.body, group.sample
        self.people = len(group.problems)
        # Person-major rows: person i's candidates are rows i*J .. i*J+J-1.
        self.terms = GroupTerms([p for p in group.problems for _ in STEPS], bucket=BUCKET)
        p0 = group.problems[0]
        self.state = _State(self.people, self.layout.n, p0.dt, p0.dev)
        self.graphs: dict = {}
        self.capture = p0.dev.type == "cuda" and CAPTURE
        # FitSettings.compile: the evaluation through torch.compile (fused kernels: fewer
        # launches per step, each graph replay shorter), compiled once per group shape.
        self.compiled = group.compiled

    # --- the arithmetic (no host reads) --------------------------------------------------------
    def _evaluate(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Losses [Q] and their gradients [Q,n] at rows ``x`` [Q,n]."""
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            loss = (_compiled_rows() if self.compiled else _rows)(self.terms, self.body, self.sample, self.layout,
                                                                   x, self.dense)
            grad, = torch.autograd.grad(loss.sum(), x)
        return loss.detach(), grad

    def _refresh(self) -> None:
        """The loss and gradient at the current variables (a round's start: new matches)."""
        st = self.state
        j = len(STEPS)
        f, g = self._evaluate(st.x[:, None].expand(-1, j, -1).reshape(-1, st.x.shape[1]))
        st.f.copy_(f[::j])
        st.g.copy_(g[::j] * st.mask)

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        """-H g by the two-loop recursion over each person's history (pairs with rho 0 weigh
        nothing; the newest pair is the last row)."""
        st = self.state
        q = g.clone()
        alphas = []
        for i in range(HISTORY - 1, -1, -1):
            a = st.rho[:, i] * (st.s[:, i] * q).sum(-1)
            q = q - a[:, None] * st.y[:, i]
            alphas.append(a)
        # Initial scale: s.y / y.y of the newest kept pair, else a step of unit length.
        kept = st.rho > 0
        newest = torch.where(kept, torch.arange(HISTORY, device=g.device), -1).argmax(-1)
        s_new = st.s.gather(1, newest[:, None, None].expand(-1, 1, st.s.shape[-1]))[:, 0]
        y_new = st.y.gather(1, newest[:, None, None].expand(-1, 1, st.y.shape[-1]))[:, 0]
        yy = (y_new * y_new).sum(-1)
        gamma = torch.where(kept.any(-1) & (yy > 0), (s_new * y_new).sum(-1) / yy.clamp_min(1e-30),
                            1.0 / torch.linalg.vector_norm(g, dim=-1).clamp_min(1e-12))
        r = q * gamma[:, None]
        for i, a in zip(range(HISTORY), reversed(alphas)):
            b = st.rho[:, i] * (st.y[:, i] * r).sum(-1)
            r = r + (a - b)[:, None] * st.s[:, i]
        return -r

    def _step(self) -> None:
        """One L-BFGS iteration for every person, in place."""
        st, j = self.state, len(STEPS)
        g = st.g
        d = self._direction(g) * st.mask
        downhill = (g * d).sum(-1) < 0
        d = torch.where(downhill[:, None], d, -g)  # not a descent direction: steepest descent
        rows = (st.x[:, None] + st.steps[None, :, None] * d[:, None]).reshape(-1, st.x.shape[1])
        f, grad = self._evaluate(rows)
        f, grad = f.view(-1, j), grad.view(-1, j, st.x.shape[1])
        f = torch.where(torch.isfinite(f), f, torch.full_like(f, float("inf")))
        pick = f.argmin(-1)  # the lowest of the step lengths tried: a line search on a grid
        f_new = f.gather(1, pick[:, None])[:, 0]
        moved = f_new < st.f
        x_new = st.x + st.steps[pick][:, None] * d
        g_new = grad.gather(1, pick[:, None, None].expand(-1, 1, grad.shape[-1]))[:, 0] * st.mask
        s, y = x_new - st.x, g_new - g
        sy = (s * y).sum(-1)
        keep = moved & (sy > 1e-10)
        roll = lambda buf, new: torch.cat([buf[:, 1:], new[:, None]], 1)  # noqa: E731
        st.s.copy_(torch.where(keep[:, None, None], roll(st.s, s), st.s))
        st.y.copy_(torch.where(keep[:, None, None], roll(st.y, y), st.y))
        rho = torch.where(keep[:, None], roll(st.rho, 1.0 / sy.clamp_min(1e-30)), st.rho)
        st.rho.copy_(torch.where(moved[:, None], rho, torch.zeros_like(rho)))  # stuck: start afresh
        st.x.copy_(torch.where(moved[:, None], x_new, st.x))
        st.g.copy_(torch.where(moved[:, None], g_new, g))
        st.f.copy_(torch.where(moved, f_new, st.f))

    # --- running --------------------------------------------------------------------------
    def run(self, what: str) -> None:
        """``what``: "refresh" or "step"; replayed from a captured graph on CUDA."""
        fn = self._refresh if what == "refresh" else self._step
        if not self.capture:
            return fn()
        graph = self.graphs.get(what)
        if graph is None:
            try:
                graph = self.graphs[what] = _capture(fn, self.state)
            except RuntimeError as exc:  # torch.AcceleratorError is one: a step that cannot be held
                # The same arithmetic eagerly, for this process (the first H100 capture failed on
                # a backward formula that read the device; say so rather than fail the fit).
                global CAPTURE
                CAPTURE, self.capture = False, False
                log.warning("body fit: a CUDA graph of the %s could not be captured (%s: %s); the "
                            "steps run without graphs from now on", what, type(exc).__name__, str(exc)[:300])
                return fn()
        graph.replay()


def _rows(terms, body, sample, layout, x, dense):
    return losses_of(terms, body, sample, layout.variables(terms, x), dense)


_COMPILED = None


def _compiled_rows():
    """_rows through torch.compile, made once per process (static shapes: one graph per group
    shape, as the captured steps are)."""
    global _COMPILED
    if _COMPILED is None:
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _COMPILED = torch.compile(_rows, dynamic=False)
    return _COMPILED


def _capture(fn, state: _State):
    """``fn`` captured as a CUDA graph (after warm-ups on a side stream, as torch asks; their
    writes to the state are undone). Two warm-ups: a compiled evaluation compiles its forward
    on the first call and may compile again on the second (AOTAutograd's backward, guards on
    state the first call set); compiling inside a capture fails. During the capture a
    recompilation is an error (said plainly) rather than a compiler run inside the graph."""
    import torch._dynamo

    saved = {k: v.clone() for k, v in vars(state).items() if isinstance(v, torch.Tensor)}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
            for k, v in saved.items():
                getattr(state, k).copy_(v)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    strict = torch._dynamo.config.error_on_recompile
    torch._dynamo.config.error_on_recompile = True
    try:
        with torch.cuda.graph(graph):
            fn()
    except BaseException:
        release_generator(state.x.device)
        raise
    finally:
        torch._dynamo.config.error_on_recompile = strict
    return graph


def release_generator(device) -> bool:
    """After a failed capture: the device's default random generator in a fresh state. A capture
    that fails ends without its epilogue, leaving the generator marked as capturing; its next
    use outside a graph then fails with "Offset increment outside graph capture" (what the
    H100's compiled run met after its capture had failed). Same seed and offset, not capturing.
    False where there is nothing to release (the CPU) or torch lacks the calls."""
    if device.type != "cuda":
        return False
    try:
        gen = torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
        gen.graphsafe_set_state(gen.clone_state())
        return True
    except Exception as exc:  # noqa: BLE001 - a torch without graph-safe generator states
        log.warning("body fit: could not reset the CUDA generator after a failed capture (%s)", exc)
        return False


# Captured solvers by group shape (graphs and the buffers they read), most recent last.
_SOLVERS: "OrderedDict[tuple, _Solver]" = OrderedDict()


def _key(group: "GraphGroup", dense: bool, terms: GroupTerms) -> tuple:
    shapes = tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(vars(terms).items()) if isinstance(v, torch.Tensor))
    # Python numbers the capture bakes in: the flags that shape the pass, the term weights.
    settings = group.problems[0].f.settings
    flags = (terms.any_depth, terms.relative, terms.any_points, getattr(terms, "any_world", False), settings.fingers,
             group.compiled, tuple(sorted(terms.wt.items())))
    return (id(group.body), dense, len(group.problems), flags, shapes)


class GraphGroup(Group):
    """group.Group with run_lbfgs replaced by the fixed-length, sync-free steps above."""

    def __init__(self, problems: list):
        super().__init__(problems)
        self.layout = Layout(problems[0].f)

    def _solver(self, dense: bool) -> _Solver:
        """This group's solver: on CUDA a cached one of the same shape, its buffers refilled
        with this group's observations (its graphs read them in place)."""
        fresh = _Solver(self, dense)
        if not fresh.capture:
            return fresh
        key = _key(self, dense, fresh.terms)
        old = _SOLVERS.pop(key, None)
        if old is None:
            old = fresh
        else:
            _refill(old.terms, fresh.terms)
        _SOLVERS[key] = old
        while len(_SOLVERS) > GRAPHS_KEPT:
            _SOLVERS.popitem(last=False)
        return old

    def pick_correspondences(self) -> None:
        super().pick_correspondences()  # self.terms: the plain group's (fold choice reads it)
        if getattr(self, "_active", None) is not None:
            terms = self._active.terms
            held = {k: v for k, v in vars(terms).items() if isinstance(v, torch.Tensor)}
            terms.new_round()
            _refill(terms, terms, held)

    def run_lbfgs(self, iterations: int, dense: bool, rounds: int = 1, cancel=None,
                  shape_round: bool = False, shape: bool = True, keep_history: bool = False) -> list[int]:
        self.terms = GroupTerms(self.problems)
        solver = self._active = self._solver(dense)
        st = solver.state
        st.x.copy_(self.layout.pack(self.problems))
        st.mask.copy_(self.layout.mask(self.problems, dense, shape, shape_round))
        st.clear_history()
        try:
            for r in range(rounds):
                if r and not keep_history:
                    st.clear_history()
                self._rest = {}
                if dense:
                    self.layout.unpack(st.x, self.problems)
                    self.pick_correspondences()
                solver.run("refresh")
                for _ in range(iterations):
                    if cancel is not None:
                        cancel.check()
                    solver.run("step")
        finally:
            self.layout.unpack(st.x, self.problems)
            self._active = None
        # Evaluations, as group.py counts them: one batched evaluation per step.
        return [rounds * (iterations + 1)] * len(self.problems)


def _refill(static: GroupTerms, new: GroupTerms, held: dict | None = None) -> None:
    """``static``'s tensors take ``new``'s values in place (a captured graph reads them by
    address); its other attributes are replaced. ``held``: the tensors to write into, when
    ``new`` is ``static`` itself after new_round() put fresh tensors on it."""
    held = held if held is not None else {k: v for k, v in vars(static).items() if isinstance(v, torch.Tensor)}
    for k, v in vars(new).items():
        if k in ("f",):  # the fitter the graphs were captured with keeps its index tensors
            continue
        if isinstance(v, torch.Tensor) and k in held and held[k].shape == v.shape:
            if held[k] is not v:
                held[k].copy_(v)
            setattr(static, k, held[k])
        else:
            setattr(static, k, v)
