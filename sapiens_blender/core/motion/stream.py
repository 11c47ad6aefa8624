# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip through the inference server, several frames in flight, results in input order.

Up to ``parallel`` frames are analysed at once (the server batches queued requests of one model
into one forward pass); frames are read from the source only as slots free up, so the clip is
never held in memory whole. ``run_clip`` feeds the maps to a :class:`ClipAnimator` in order and
reports per-frame progress; a set ``cancel_event`` stops it (frames in flight are cancelled on
the server) with :class:`RequestCancelled`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from ..errors import RequestCancelled
from .clip import AnimateOptions, Animation, ClipAnimator
from .poses import PoseSource
from .sources import Frame, FrameSkipped, FrameSource

MAX_SKIPPED_NOTES = 20  # past these, one line counts the rest

# progress(frames done, frames in all or None if unknown, message)
FrameProgress = Callable[[int, "int | None", str], None]


def analyze_frames(frames: Iterator[Frame], analyze: Callable, parallel: int = 4,
                   cancel_event: threading.Event | None = None) -> Iterator[tuple[Frame, object]]:
    """(frame, maps) in input order; ``analyze(frame)`` -> Maps runs in ``parallel`` threads."""
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1, got {parallel}")
    cancel_event = cancel_event or threading.Event()
    window: deque = deque()
    frames = iter(frames)
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="sapiens-frame") as pool:
        try:
            while True:
                while len(window) < parallel and not cancel_event.is_set():
                    frame = next(frames, None)
                    if frame is None:
                        break
                    window.append((frame, pool.submit(analyze, frame)))
                if not window:
                    break
                frame, future = window.popleft()
                yield frame, future.result()
                if cancel_event.is_set():
                    raise RequestCancelled("the animation was cancelled")
        finally:  # frames not started yet never start (cancel or error)
            for _, future in window:
                future.cancel()


def server_analyzer(client, model: str, max_side: int | None = None,
                    cancel_event: threading.Event | None = None) -> Callable[[Frame], object]:
    """analyze(frame) -> Maps through ``client`` (a frame of a maps folder is just loaded)."""
    from ..remote.analysis import analyze_photo

    from ..errors import InvalidRequest
    from ..maps.canonical import MapsError

    def analyze(frame: Frame):
        try:
            if frame.maps_path is not None:
                return frame.load_maps()
            return analyze_photo(client, frame.data, model, max_side=max_side, cancel_event=cancel_event,
                                 clip_frame=True)
        except (MapsError, InvalidRequest) as exc:  # this frame's file, not the clip: go on without it
            raise FrameSkipped(str(exc)) from exc
    return analyze


def run_clip(source: FrameSource, analyze: Callable[[Frame], object], *, parallel: int = 4,
             pose_source: PoseSource | None = None, options: AnimateOptions = AnimateOptions(),
             progress: FrameProgress | None = None,
             cancel_event: threading.Event | None = None) -> Animation:
    """Every selected frame of ``source`` -> an :class:`Animation`."""
    cancel_event = cancel_event or threading.Event()
    animator = ClipAnimator(source.output_fps, pose_source, options)
    total = source.selected
    done = 0

    skipped = source.skipped  # the source adds the frames it cannot even read (0-byte files)

    def analyze_and_detect(frame):  # in the worker threads: lifting overlaps other frames' analysis
        try:
            maps = analyze(frame)
        except FrameSkipped as exc:
            return None, str(exc)
        return maps, animator.poses.detect(maps)

    for frame, (maps, detections) in analyze_frames(iter(source), analyze_and_detect, parallel, cancel_event):
        if maps is None:
            skipped.append(f"{frame.name}: {detections}")
            continue
        ids = animator.add(frame.index, maps, detections)
        done += 1
        if progress is not None:
            progress(done, total, f"frame {frame.index}: {len(ids)} "
                                  f"{'person' if len(ids) == 1 else 'people'}")
    if done == 0:
        if skipped:
            raise ValueError(f"no frame of the input could be used (the first: {skipped[0]})")
        raise ValueError("the frame range selects no frame of the input")
    animation = animator.finish()
    animation.notes += source_notes(source)
    return animation


def source_notes(source: FrameSource) -> list[str]:
    """What the source left out, one line each: skipped frames by name, a clip that ended early."""
    notes = [f"skipped frame {why}" for why in source.skipped[:MAX_SKIPPED_NOTES]]
    if len(source.skipped) > MAX_SKIPPED_NOTES:
        notes.append(f"... and {len(source.skipped) - MAX_SKIPPED_NOTES} more frames skipped")
    if source.ended_early is not None:
        read, expected = source.ended_early
        notes.append(f"the clip ended early: {read} of the {expected} frames it announces could be decoded "
                     "(a truncated or damaged file?)")
    return notes
