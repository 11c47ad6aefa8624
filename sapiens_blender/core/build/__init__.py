# SPDX-License-Identifier: GPL-3.0-or-later
"""What a build is asked for (options, body modes), its geometry steps and its typed report."""
