# SPDX-License-Identifier: GPL-3.0-or-later
"""Background jobs with progress and cancellation, and main-thread jobs run in steps."""
