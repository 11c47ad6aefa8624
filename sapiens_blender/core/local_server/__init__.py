# SPDX-License-Identifier: GPL-3.0-or-later
"""The local inference server: its environment, runtime, process, and when to (re)start it."""
