# SPDX-License-Identifier: GPL-3.0-or-later
"""The sapiens_blender inference server: models behind the Open Inference Protocol (v2).

Runs in its own Python environment. The server core and the offline backend need no torch;
the Sapiens backends import torch lazily. Never imports bpy or sapiens_blender.
"""

__version__ = "0.1.0"
