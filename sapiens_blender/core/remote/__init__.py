# SPDX-License-Identifier: GPL-3.0-or-later
"""Talking to an inference server: the v2 client and its codec, the analysis and body calls."""
