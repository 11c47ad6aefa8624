# SPDX-License-Identifier: GPL-3.0-or-later
"""bpy-free core (numpy + stdlib): one folder per concept (maps, remote, local_server, body, build,
geometry, motion, jobs, files); errors and the state-enum base stay loose."""
