# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure numpy steps shared by the backends (no torch at import time)."""
