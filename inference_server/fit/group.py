# SPDX-License-Identifier: GPL-3.0-or-later
"""The people of one photo fitted together: one batched body pass per evaluation.

An evaluation of the fit is bound by the number of small tensor operations, not by their size:
skinning four bodies costs about what skinning one does. So the people of a photo share each
evaluation: their rest bodies, bones, skinning and joints are one batched pass, and so are their
terms (terms.GroupTerms), each person's loss its own row.

Each person keeps its own L-BFGS (its own curvature history and line search: one L-BFGS on
everyone's variables needed ~30 % more iterations for the same joints), each on a thread of its
own that does nothing but wait for its evaluations: an evaluation is answered once every person
still running has asked for one, by one batched pass for all (``_Lockstep``).
"""

from __future__ import annotations

import threading

import torch

from .terms import GroupTerms


class CompileFailed(RuntimeError):
    """torch.compile could not build the fit's evaluation (no C++ compiler, say)."""


class Group:
    """Problems (problem.PersonProblem, one per person) optimised together."""

    def __init__(self, problems: list):
        self.problems = problems
        fitter = problems[0].f
        self.body, self.sample = fitter.body, fitter._vertex_sample
        self.compiled = fitter.settings.compile
        self.terms: GroupTerms | None = None  # made by run_lbfgs, once the starts are set
        self._rest: dict = {}

    def rest(self, dense: bool):
        """The people's shaped rest bodies, batched, for steps that hold the shapes: computed
        once (per round: run_lbfgs clears it) and kept."""
        key = "dense" if dense else "skeleton"
        if self._rest.get(key) is None:
            phen = torch.cat([p.phenotypes() for p in self.problems])
            self._rest[key] = self.body.rest_state(phen, sample=self.sample if dense else None).detach()
        return self._rest[key]

    def losses(self, dense: bool, with_shape: bool = True, compiled: bool = False) -> torch.Tensor:
        """Each person's loss [P], from one batched pass; ``compiled``: through the
        torch.compile'd pass. A dense evaluation needs the round's correspondences
        (pick_correspondences: eager, they pick points with data-dependent shapes)."""
        rest = None if with_shape else self.rest(dense)
        return (_compiled_pass() if compiled else _body_pass)(self, dense, rest)

    def pick_correspondences(self) -> None:
        """A surface round's matches, from the people's current bodies (each posed whole:
        PersonProblem.pick_correspondences)."""
        # The whole bodies posed in one pass for the group (on a GPU, person by person this pass
        # was ~400 small operations each, every round); the matching is each person's own.
        with torch.no_grad():
            ps = self.problems
            whole = ps[0].f.body.full(torch.cat([p.phenotypes() for p in ps]), torch.cat([p.rotvecs() for p in ps]))
            for p, verts in zip(ps, whole["vertices"]):
                p.pick_correspondences(p.to_camera(verts))
        self.terms.new_round()

    def run_lbfgs(self, iterations: int, dense: bool, rounds: int = 1, cancel=None,
                  shape_round: bool = False, shape: bool = True, keep_history: bool = False) -> list[int]:
        """Quasi-Newton, per person, on all its variables (``shape_round``: on its shape and
        placement alone); with ``shape=False`` the shapes are held (the rest bodies computed
        once: a third of an evaluation's cost). Surface correspondences are held within a round
        and refreshed between rounds; ``keep_history``: each person's L-BFGS goes on from one
        round to the next with its curvature pairs (new matches change the loss a little, not
        its curvature), instead of starting again from a gradient step. Returns each person's
        number of evaluations."""
        params = []
        for p in self.problems:
            if shape_round:
                params.append([p.shape_logit, p.root_t, p.root_rot])
            else:
                params.append([v for g in p._params(dense) for v in g["params"] if shape or v is not p.shape_logit])
        counts = [0] * len(self.problems)
        self.terms = GroupTerms(self.problems)  # the placements' closed-form parts are set by now
        kept = [_lbfgs(group, iterations) for group in params] if keep_history else None
        for _ in range(rounds):
            self._rest = {}
            if dense:
                self.pick_correspondences()
            step = _Lockstep(self, [v for group in params for v in group], dense, shape, cancel)
            optimisers = kept or [_lbfgs(group, iterations) for group in params]
            for i, n in enumerate(step.run(optimisers)):
                counts[i] += n
            if self.compiled:
                _COMPILED_VARIANTS.add(compile_variant([p.obs for p in self.problems]))
        return counts


def _body_pass(group: Group, dense: bool, rest) -> torch.Tensor:
    """The evaluation proper: the people's bodies (shaped here, differentiably, when ``rest`` is
    None), their joints and, when ``dense``, their sampled surfaces, then their terms; each
    person's loss [P]. Free of host reads and data-dependent shapes (a test traces it as one
    graph), which is what compiling it, and capturing it on a GPU, needs."""
    return losses_of(group.terms, group.body, group.sample, group.terms.variables(), dense, rest)


def losses_of(terms: GroupTerms, body, sample, v, dense: bool, rest=None) -> torch.Tensor:
    """Each person's loss [P] at variables ``v`` (terms.Variables): _body_pass's arithmetic,
    shared with graph_solver.py, which passes its own variables."""
    if rest is None:
        rest = body.rest_state(v.phenotypes, sample=sample if dense else None)
    if dense:
        joints, posed = body.sampled(rest, v.rotvecs, sample)
        # The dense surface knows the depth better than the joint radii do.
        return terms.keypoints(joints, v, terms.wt["lift_dense"]) + terms.priors(v, joints) + terms.surface(posed, v)
    joints = body.skeleton(rest, v.rotvecs).joints
    return terms.keypoints(joints, v) + terms.priors(v, joints)


_COMPILED = None
_COMPILE_LOCK = threading.Lock()
_COMPILED_VARIANTS: set[tuple] = set()  # what this process has compiled the pass for


def compile_variant(observations: list) -> tuple:
    """What a compiled pass is specialised on: the number of people and each one's kind of
    depth (metric, relative, none); other differences (numbers of points, pixels) are dynamic."""
    return len(observations), tuple((o.metric, o.has_depth) for o in observations)


def compiled_for(observations: list) -> bool:
    """Whether this process already compiled the pass for such a group (else the next compiled
    fit of it spends a while compiling first)."""
    return compile_variant(observations) in _COMPILED_VARIANTS


def _compiled_pass():
    """``_body_pass`` through torch.compile, made once per process. Dynamic shapes from the
    start: people differ in their numbers of points and pixels, and a graph per person would
    recompile every photo. Compiled code lands in the user's cache folder, so a later process
    reuses it (compiling again then takes seconds, not minutes)."""
    global _COMPILED
    with _COMPILE_LOCK:
        if _COMPILED is None:
            _COMPILED = _make_compiled()
    return _COMPILED


def _make_compiled():
    """torch.compile(_body_pass), its cache folder and limits set; a compiler failure becomes
    CompileFailed, with what to do."""
    import os

    import torch._dynamo
    import torch._dynamo.exc

    # In the user's cache folder, not torch's default in /tmp: the compiled code outlives a reboot.
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(base, "sapiens_blender", "fit_compile"))

    # Variants (stage x people per group x kind of depth) each hold a graph; the default
    # limit of 8 would send the rest back to eager without a word.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    compiled = torch.compile(_body_pass, dynamic=True)

    def body_pass(group: Group, dense: bool, rest) -> list[torch.Tensor]:
        try:
            return compiled(group, dense, rest)
        except torch._dynamo.exc.BackendCompilerFailed as exc:
            inner = exc.inner_exception
            raise CompileFailed(f"compiling the body fit failed ({type(inner).__name__}: {str(inner)[:300]}); "
                                f"torch.compile needs a C++ compiler on a CPU. Start the server without "
                                f"--fit-compile") from exc
    return body_pass


def _lbfgs(params: list, iterations: int) -> torch.optim.LBFGS:
    return torch.optim.LBFGS(params, lr=1.0, max_iter=iterations, history_size=20,
                             line_search_fn="strong_wolfe", tolerance_grad=1e-6, tolerance_change=1e-9)


class _Lockstep:
    """Runs each person's optimiser on its own thread and answers their evaluations together:
    when every person still running waits for one, one batched pass computes all their losses
    and gradients. Deterministic: every pass evaluates every person at its current variables,
    and a thread only touches its own variables while the others wait."""

    def __init__(self, group: Group, params: list, dense: bool, shape: bool, cancel):
        self.group, self.params, self.dense, self.shape, self.cancel = group, params, dense, shape, cancel
        self.cv = threading.Condition()
        self.running: set[int] = set()
        self.asking: set[int] = set()
        self.answers: dict[int, torch.Tensor] = {}
        self.generation = 0
        self.error: BaseException | None = None

    def run(self, optimisers: list) -> list[int]:
        counts = [0] * len(optimisers)
        self.running = set(range(len(optimisers)))

        def closure_of(i):
            def closure():
                counts[i] += 1
                return self._evaluate(i)
            return closure

        def work(i):
            try:
                optimisers[i].step(closure_of(i))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                with self.cv:
                    self.error = self.error or exc
                    self.cv.notify_all()
            finally:
                self._leave(i)

        if len(optimisers) == 1:  # one person: no thread needed
            work(0)
        else:
            threads = [threading.Thread(target=_with_threads(work, torch.get_num_threads()), args=(i,),
                                        name=f"body fit {i}", daemon=True) for i in range(len(optimisers))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if self.error is not None:
            raise self.error
        return counts

    def _evaluate(self, i: int) -> torch.Tensor:
        with self.cv:
            if self.error is not None:  # another person failed: no wasted pass
                raise RuntimeError("another person's fit failed") from self.error
            self.asking.add(i)
            generation = self.generation
            if self.asking >= self.running:
                self._answer()
            else:
                self.cv.wait_for(lambda: self.generation != generation or self.error is not None)
            if self.error is not None:
                raise RuntimeError("another person's fit failed") from self.error
            return self.answers.pop(i)

    def _leave(self, i: int) -> None:
        with self.cv:
            self.running.discard(i)
            if self.asking and self.asking >= self.running and self.error is None:
                self._answer()

    def _answer(self) -> None:
        """One batched evaluation for everyone (called holding the lock, by the last to ask)."""
        try:
            if self.cancel is not None:
                self.cancel.check()
            for v in self.params:
                v.grad = None
            losses = self.group.losses(self.dense, with_shape=self.shape, compiled=self.group.compiled)
            losses.sum().backward()
            self.answers = {i: losses[i].detach() for i in self.asking}
        except BaseException as exc:  # noqa: BLE001 - every waiting thread raises it
            self.error = exc
        self.asking = set()
        self.generation += 1
        self.cv.notify_all()


def _with_threads(fn, n: int):
    """``fn`` on a thread with the caller's torch thread count (it is per thread)."""
    def run(*args):
        torch.set_num_threads(n)
        return fn(*args)
    return run
