# SPDX-License-Identifier: GPL-3.0-or-later
"""Open Inference Protocol (v2): tensors and messages <-> numpy, no HTTP."""
