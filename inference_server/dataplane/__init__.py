# SPDX-License-Identifier: GPL-3.0-or-later
"""Models behind the protocol: the backend base and registry, model slots, jobs, one infer request,
the Ray batch analyzer."""
