# SPDX-License-Identifier: GPL-3.0-or-later
"""Following people across frames: optimal assignment of detections to tracks.

Each track predicts where its joints and box will be (constant velocity from its last two
sightings, so two people crossing keep their headings); where its last sighting fits a detection
better (a velocity from two noisy sightings overshoots), that counts instead. The cost of giving a detection to a
track is the median 3D distance of their common joints (metres; along the camera's axis
weighted DEPTH_WEIGHT: a photo's depth is its least sure axis) plus ``box_weight`` x (1 - IoU)
of the image boxes; pairs above ``gate`` are never matched. Only joints measured in both the
detection and the track's last sighting count when there are three: joints filled in (legs out
of a close-up's frame, most of its 24) jump from frame to frame and carried one person's track
past the gate. The assignment minimises the total cost (Hungarian method, numpy). A track
unseen for more than ``max_missing`` frames ends; a detection nobody claims starts a new track.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_BIG = 1e9
# How much a difference along the camera's axis counts against one across the image: a single
# camera places a person across the image within centimetres, but their distance only within
# ~10 % (from their size): on PoseTrack's real clip a player 5 m away jumped 0.47 m in depth
# between two frames (box IoU 0.70), past the gate, and was split into three short tracks.
DEPTH_WEIGHT = 0.3


@dataclass
class Detection:
    """One person in one frame, as a pose source gives it."""

    joints: np.ndarray  # float64 [J,3], camera frame, NaN where unknown (names: the source's)
    box: np.ndarray  # float64 [4]: x0, y0, x1, y1 in pixels
    estimated: np.ndarray | None = None  # bool [J]: filled in rather than measured
    confidence: np.ndarray | None = None  # [J] in (0, 1]: how much to trust each joint (1 = fully)
    payload: object = None  # whatever the pose source attaches (e.g. a fitted body's pose)


@dataclass
class Track:
    id: int
    frames: list = field(default_factory=list)  # frame numbers (positions in the analysed sequence)
    detections: list = field(default_factory=list)

    def predict(self, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """Joints and box expected at ``frame`` (constant velocity from the last two sightings)."""
        j1, b1, f1 = self.detections[-1].joints, self.detections[-1].box, self.frames[-1]
        if len(self.frames) < 2:
            return j1, b1
        j0, b0, f0 = self.detections[-2].joints, self.detections[-2].box, self.frames[-2]
        step = (frame - f1) / max(f1 - f0, 1)
        vel = np.where(np.isfinite(j0), j1 - j0, 0.0)
        return j1 + step * vel, b1 + step * (b1 - b0)


class Tracker:
    def __init__(self, gate: float = 0.6, box_weight: float = 0.5, max_missing: int = 15):
        self.gate, self.box_weight, self.max_missing = gate, box_weight, max_missing
        self.active: list[Track] = []
        self.finished: list[Track] = []
        self._next_id = 1

    def update(self, frame: int, detections: list[Detection]) -> list[int]:
        """Assign this frame's detections; returns the track id of each detection."""
        self.active, ended = [], self.active
        alive = []
        for t in ended:
            (alive if frame - t.frames[-1] <= self.max_missing + 1 else self.finished).append(t)
        cost = np.full((len(alive), len(detections)), _BIG)
        for i, track in enumerate(alive):
            last = track.detections[-1]
            measured = None if last.estimated is None else ~last.estimated
            # Where the track's velocity takes it, or where it was last seen, whichever fits: a
            # velocity from two noisy sightings, extrapolated over a missed frame, can throw the
            # prediction further than the person moved (PoseTrack's real clip: a player's
            # one-frame outlier, then 0.87 from the velocity's guess against 0.42 from his last place).
            guesses = [track.predict(frame)] + ([(last.joints, last.box)] if len(track.frames) > 1 else [])
            for j, det in enumerate(detections):
                cost[i, j] = min(self.pair_cost(jo, bo, det, measured) for jo, bo in guesses)
        rows, cols = assign(cost, self.gate)
        ids = [0] * len(detections)
        for r, c in zip(rows, cols):
            alive[r].frames.append(frame)
            alive[r].detections.append(detections[c])
            ids[c] = alive[r].id
        for c, det in enumerate(detections):
            if not ids[c]:
                track = Track(self._next_id, [frame], [det])
                self._next_id += 1
                alive.append(track)
                ids[c] = track.id
        self.active = alive
        return ids

    def pair_cost(self, joints, box, det: Detection, measured: np.ndarray | None = None) -> float:
        """``measured``: which of the track's ``joints`` were measured (not filled in)."""
        common = np.isfinite(joints).all(1) & np.isfinite(det.joints).all(1)
        if common.sum() < 3:
            return _BIG
        if measured is not None and det.estimated is not None:
            both = common & measured & ~det.estimated
            if both.sum() >= 3:
                common = both
        diff = (joints[common] - det.joints[common]) * (1.0, 1.0, DEPTH_WEIGHT)
        dist = float(np.median(np.linalg.norm(diff, axis=1)))
        return dist + self.box_weight * (1.0 - box_iou(box, det.box))

    def tracks(self) -> list[Track]:
        """All tracks, finished and active, by id."""
        return sorted(self.finished + self.active, key=lambda t: t.id)


def box_iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def assign(cost: np.ndarray, gate: float = np.inf) -> tuple[list[int], list[int]]:
    """Minimum-cost matching of rows to columns; pairs costing more than ``gate`` stay unmatched."""
    cost = np.asarray(cost, np.float64)
    n_rows, n_cols = cost.shape
    if n_rows == 0 or n_cols == 0:
        return [], []
    # Pad to a square matrix where "unmatched" costs the gate: a real pair above it never wins.
    n = n_rows + n_cols
    square = np.full((n, n), 0.0)
    square[:n_rows, :n_cols] = np.minimum(cost, _BIG)
    square[:n_rows, n_cols:] = np.where(np.eye(n_rows, n_rows), gate if np.isfinite(gate) else _BIG / 2, _BIG)[:, :n_rows]
    square[n_rows:, :n_cols] = np.where(np.eye(n_cols), gate if np.isfinite(gate) else _BIG / 2, _BIG)
    col_of_row = hungarian(square)
    rows, cols = [], []
    for r in range(n_rows):
        c = int(col_of_row[r])
        if c < n_cols and cost[r, c] <= gate:
            rows.append(r)
            cols.append(c)
    return rows, cols


def hungarian(cost: np.ndarray) -> np.ndarray:
    """Column assigned to each row of a square cost matrix (shortest augmenting paths with
    potentials, O(n^3); the inner scans are vectorised)."""
    n = cost.shape[0]
    u = np.zeros(n + 1)
    v = np.zeros(n + 1)
    match = np.zeros(n + 1, np.int64)  # match[col] = row (1-based; 0 = free)
    way = np.zeros(n + 1, np.int64)
    for row in range(1, n + 1):
        match[0] = row
        col0 = 0
        minv = np.full(n + 1, np.inf)
        used = np.zeros(n + 1, bool)
        while True:
            used[col0] = True
            r0 = match[col0]
            free = ~used[1:]
            reduced = cost[r0 - 1] - u[r0] - v[1:]
            better = free & (reduced < minv[1:])
            minv[1:] = np.where(better, reduced, minv[1:])
            way[1:] = np.where(better, col0, way[1:])
            candidates = np.where(free, minv[1:], np.inf)
            col1 = int(np.argmin(candidates)) + 1
            delta = candidates[col1 - 1]
            u[match[used]] += delta
            v[used] -= delta
            minv[1:] = np.where(free, minv[1:] - delta, minv[1:])
            col0 = col1
            if match[col0] == 0:
                break
        while col0:
            col1 = way[col0]
            match[col0] = match[col1]
            col0 = col1
    col_of_row = np.empty(n, np.int64)
    col_of_row[match[1:] - 1] = np.arange(n)
    return col_of_row
