# SPDX-License-Identifier: GPL-3.0-or-later
"""The CLI's progress line (analyze, animate): redrawn in place on a terminal; in a log or a pipe
(a render farm's, a CI job's), whole lines, a few per stage, never carriage returns."""

import io

from sapiens_blender.cli.analyze import ProgressBar


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _run(stream) -> str:
    bar = ProgressBar(0, stream=stream)
    for stage in ("analysis", "body"):
        for frame in range(200):  # a 200-frame clip, as animate reports it
            bar.total, bar.index = 200, frame
            bar.update(stage, frame / 200, f"frame {frame}: 2 people")
    bar.update("server", None, "starting the inference server")
    bar.finish_line("done")
    return stream.getvalue()


def test_a_log_gets_whole_lines_a_few_per_stage():
    text = _run(io.StringIO())
    lines = text.splitlines()
    assert "\r" not in text and text.endswith("done\n")
    assert 20 <= len(lines) <= 24, lines  # a line per tenth of each stage, the server line, the end
    assert lines[0].startswith("[0/200]") and "analysis: frame 0: 2 people" in lines[0]
    assert any("body: frame 100" in line for line in lines)


def test_a_terminal_gets_one_line_redrawn_in_place():
    text = _run(_Terminal())
    assert text.count("\n") == 1 and text.count("\r") > 100 and text.rstrip().endswith("done")
