# SPDX-License-Identifier: GPL-3.0-or-later
"""Run by test_artist_machine.py on a Python that holds only bpy and numpy (like Blender's own):
install the platform zip, then build the bundled photo through the add-on's operators and
through its API, with the server on this very Python. Writes what it saw as JSON."""

import importlib
import json
import sys
import time

import bpy

zip_path, out_path = sys.argv[1], sys.argv[2]
ADDON = "bl_ext.user_default.sapiens_blender"
result = {"python": sys.executable}
bpy.ops.wm.read_homefile(use_empty=True)  # no default cube, light and camera
start = time.perf_counter()
result["install"] = sorted(bpy.ops.extensions.package_install_files(
    filepath=zip_path, repo="user_default", enable_on_install=True))
result["install_s"] = round(time.perf_counter() - start, 1)
addon = importlib.import_module(ADDON)
state = importlib.import_module(ADDON + ".ui.state")
photo = str(importlib.import_module(ADDON + ".data").sample_photo_path())

# 1. The operators, with the preferences as installed (no server environment set up).
prefs = bpy.context.preferences.addons[ADDON].preferences
result["python_pref"] = prefs.python_path
scene = bpy.context.scene
scene.sapiens.photo_path = photo
scene.sapiens.stride = 4
start = time.perf_counter()
result["analyze"] = sorted(bpy.ops.sapiens.analyze())
result["analyze_s"] = round(time.perf_counter() - start, 1)
result["error"] = state.SESSION.last_error
server = state.SESSION.server
result["server_python"] = server.python if server else None
result["server_log"] = server.log_tail(30) if server else ""
start = time.perf_counter()
result["build_all"] = sorted(bpy.ops.sapiens.build_all())
result["build_s"] = round(time.perf_counter() - start, 1)
result["operator_objects"] = sorted(o.type for o in bpy.data.objects)
result["source"] = importlib.import_module(ADDON + ".ui.storage").analysis_summary(scene).get("source")
state.SESSION.stop_server()

# 2. The API, in a new scene.
api = importlib.import_module(ADDON + ".api")
api.new_scene()
result["enabled_after_new_scene"] = ADDON in bpy.context.preferences.addons
start = time.perf_counter()
built = api.build_from_photo(photo, model="mediapipe", stride=4)
result["api_s"] = round(time.perf_counter() - start, 1)
result["api_objects"] = sorted(o.type for o in built.objects)
result["api_vertices"] = len(built.people[0].mesh.data.vertices)
# Where every third-party module came from: the extension's wheels or Blender's own Python.
result["module_dirs"] = sorted({m.__file__.split("site-packages")[0] for m in map(sys.modules.get, (
    "fastapi", "mediapipe", "cv2")) if m is not None and getattr(m, "__file__", None)})
json.dump(result, open(out_path, "w"), indent=1)
