# SPDX-License-Identifier: GPL-3.0-or-later
"""Maps -> a Blender scene: one camera for the photo, one collection per person.

The geometry core computes (numpy); this module only sequences it and hands the arrays to the
builders, timing each stage. Names: collection "Sapiens <stem>" holds the camera and one child
collection "Sapiens <stem> person <k>" per person, holding the mesh "Sapiens <stem> person <k>"
and its armature "Sapiens <stem> person <k> armature". Names are only for people: every object
is tagged (``identity``) with the analysis and person, which is how ``build_products`` finds
an earlier build's objects again (``incremental`` holds the per-product steps).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import bpy

from ..core.build.report import BuildReport, PersonReport
from ..core.geometry.types import GeometryError
from ..core.maps.canonical import Maps
from ..core.build.options import PRODUCTS, BodyMode, BuildOptions, wants_fit
from . import identity, incremental, lighting
from .scope import Scope


@dataclass
class PersonResult:
    person_id: int
    collection: bpy.types.Collection
    mesh: bpy.types.Object
    armature: bpy.types.Object | None
    report: PersonReport = field(default_factory=PersonReport)
    body_mesh: bpy.types.Object | None = None  # the fitted body and its rig
    body_armature: bpy.types.Object | None = None
    joints: dict | None = None  # {name: Joint} the (body) armature was built from, camera frame

    @property
    def objects(self) -> list:
        return [o for o in (self.mesh, self.armature, self.body_mesh, self.body_armature) if o is not None]


@dataclass
class BuildResult:
    camera: bpy.types.Object
    collection: bpy.types.Collection
    people: list[PersonResult]
    timings: dict[str, float]  # seconds per stage, summed over people
    report: BuildReport = field(default_factory=BuildReport)

    @property
    def objects(self) -> list:
        return [self.camera] + [o for p in self.people for o in p.objects]

    def summary(self) -> str:
        lines = [f"people: {len(self.people)}"]
        if self.report.warning:
            lines.append(f"warning: {self.report.warning}")
        lines += [f"warning: {line}" for line in self.report.skipped]
        lines += self.person_lines()
        lines.append("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in self.timings.items()))
        return "\n".join(lines)

    def person_lines(self) -> list[str]:
        """Per person: one line of facts, then its notes (information) and warnings (problems),
        each said once. The CLI's build and demo print these same lines."""
        return [line for p in self.people for line in p.report.lines(p.person_id, p.mesh is not None)]

    def to_dict(self) -> dict:
        """The build's report, JSON-ready (what the CLI and the batch store)."""
        return {**self.report.to_dict(), "timings": {k: round(v, 4) for k, v in self.timings.items()},
                "people": [{"person_id": p.person_id, **p.report.to_dict()} for p in self.people]}


class _Timer:
    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    @contextmanager
    def __call__(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


BODY_FIT_AVAILABLE = True  # the panel's "Body" shape is usable (ui/panel.py asks)


def build_from_maps(maps: Maps, options: BuildOptions | None = None) -> BuildResult:
    """Build camera + per-person mesh, materials, armature and skinning into the current scene.

    Always a new set of objects (an API/CLI build never touches an earlier one);
    ``build_products`` is the incremental form the panel's buttons use.
    """
    options = options or BuildOptions()
    if wants_fit(options.body):  # the fitted body replaces the relief / closed shell
        return build_products(maps, ["body"], options, reuse=False)
    products = ["mesh", "normal_texture"]
    products += ["part_materials"] if options.part_materials else []
    products += ["armature"] if options.armature else []
    return build_products(maps, products, options, reuse=False)


def build_products(maps: Maps, products, options: BuildOptions | None = None, *, reuse: bool = True,
                   key: str | None = None) -> BuildResult:
    """Build only ``products`` (names from PRODUCTS) for each person of ``options.people``.

    With ``reuse`` the objects an earlier build of the same analysis left in the scene (found by
    their tags, see ``identity``: renamed or moved objects included) are kept and completed, so
    calling this again never duplicates anything; without it everything is made anew. Every
    product implies the camera and the person's mesh. ``key`` identifies the analysis (default:
    a fingerprint of the maps). ``part_materials``/``armature`` in ``options`` are ignored here.
    """
    steps = iter_build_products(maps, products, options, reuse=reuse, key=key)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def iter_build_products(maps: Maps, products, options: BuildOptions | None = None, *, reuse: bool = True,
                        key: str | None = None):
    """``build_products`` in steps, for the panel: yields ``(stage, fraction)`` before each step
    and returns the BuildResult. Stopping between steps leaves what was built so far, which a
    later build with ``reuse`` finds and completes."""
    options = options or BuildOptions()
    if options.normal_space not in ("OBJECT", "TANGENT"):
        raise ValueError(f"normal_space must be 'OBJECT' or 'TANGENT', got {options.normal_space!r}")
    unknown_products = sorted(set(products) - set(PRODUCTS))
    if unknown_products:
        raise ValueError(f"unknown product(s) {unknown_products}; choose from {list(PRODUCTS)}")
    mode = BodyMode.parse(options.body)  # a bad mode: ValueError naming the modes
    if "body" in products and mode is BodyMode.NONE:
        options = replace(options, body="clothed")  # asking for the body product means a body
    from ..core.body.rig_names import RIG_NAMES

    if options.rig_names not in RIG_NAMES:
        raise ValueError(f"rig_names must be one of {', '.join(RIG_NAMES)}, got {options.rig_names!r}")
    people = maps.person_ids if options.people is None else list(options.people)
    if not people:
        raise GeometryError(f"no person found by {maps.source}: nothing to build (a person mostly out of "
                            "the frame, very small or upside down may be missed)")
    unknown = sorted(set(people) - set(maps.person_ids))
    if unknown:
        raise GeometryError(f"no person {unknown} in the maps; people present: {maps.person_ids}")
    timer = _Timer()
    scope = Scope(maps, options, timer, reuse, key)
    relief = bool(set(products) - {"body"})
    steps_per_person = [("surface", None), ("mesh", None)] if relief else []
    steps_per_person += [("normal texture", "normal_texture")] if "normal_texture" in products else []
    steps_per_person += [("part materials", "part_materials")] if "part_materials" in products else []
    if "armature" in products:
        steps_per_person += [("armature", "armature"), ("skinning", "armature")]
    if "body" in products:
        steps_per_person += [("body", "body")]
    total = len(people) * len(steps_per_person) + 1
    done = 0
    results, skipped = [], []
    for pid in people:
        person = incremental.PersonBuild(scope, pid)
        before, first_step = _objects_of(person), done
        try:
            for stage, _ in steps_per_person:
                label = f"person {pid}: {stage}" if len(people) > 1 else stage
                yield label, done / total
                done += 1
                yield from _person_step(person, stage, label, done, total, options)
        except GeometryError as exc:
            # One unusable person (no keypoints, an empty mask) must not cost the others: drop
            # what this build made of them and go on; only when nobody is left does it fail.
            # A person built before (the panel's next step) is the user's to mend: say it.
            if before:
                raise
            _discard_new(person, before)
            skipped.append((pid, exc))
            done = first_step + len(steps_per_person)
            continue
        results.append(PersonResult(pid, person.ensure_collection(), person.mesh, person.armature,
                                    person.finish(), person.body_mesh, person.body_armature, person.joints))
    if not results and skipped:
        raise skipped[0][1]
    yield "world and light", done / total
    cam, _ = scope.camera()
    with timer("world and light"):
        lit = lighting.ensure_world_and_light(scope.scene, maps, scope.base, scope.root()) if options.lighting else []
    report = BuildReport(source=maps.source, metric=bool(maps.metric), size=(maps.width, maps.height),
                         analysis=scope.key, added=list(lit))
    if not maps.metric:
        report.warning = "relative depth (not metric): sizes are only plausible, not measured"
    report.skipped = [f"person {pid} skipped: {exc}" for pid, exc in skipped]
    return BuildResult(cam, scope.root(), results, timer.seconds, report)


def _person_step(person, stage: str, label: str, done: int, total: int, options):
    """One build step of one person (a generator: the skinning reports sub-steps)."""
    if stage == "surface":
        if person.mesh is None:  # the geometry (numpy) apart from the mesh object
            person.surface()
    elif stage == "mesh":
        person.ensure_mesh()
    elif stage == "normal texture":
        person.ensure_normal_texture(options.normal_space)
    elif stage == "part materials":
        person.ensure_part_materials()
    elif stage == "armature":
        person.ensure_armature(skin=False)
    elif stage == "skinning":
        for sub in person.skinning_steps():
            yield f"{label}: {sub}", (done - 0.5) / total
    elif stage == "body":
        person.ensure_body()


def _objects_of(person) -> set[int]:
    objects = (person.mesh, person.armature, person.body_mesh, person.body_armature, person.collection)
    return {o.as_pointer() for o in objects if o is not None}


def _discard_new(person, before: set[int]) -> None:
    """Remove what a failed person build made (objects kept from an earlier build stay)."""
    for obj in (person.mesh, person.armature, person.body_mesh, person.body_armature):
        if obj is not None and obj.as_pointer() not in before:
            data = obj.data
            bpy.data.objects.remove(obj)
            if data is not None and data.users == 0:
                (bpy.data.meshes if isinstance(data, bpy.types.Mesh) else bpy.data.armatures).remove(data)
    coll = person.collection
    if coll is not None and coll.as_pointer() not in before and not coll.all_objects:
        bpy.data.collections.remove(coll)
    # The person's materials, then images, now used by nothing (forgotten by the scope first).
    for data in (bpy.data.materials, bpy.data.images):
        doomed = [d for d in data if d.users == 0 and identity.is_tagged(d, person.scope.key, person=person.pid)]
        person.scope.forget({d.as_pointer() for d in doomed})
        for block in doomed:
            data.remove(block)
